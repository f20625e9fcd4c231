#!/bin/sh
# Posts strainline's Markdown on a pull request as one sticky comment: found again by a
# hidden marker and updated, never duplicated. Used by action.yml; runs anywhere with
# curl and jq.
#
#   comment.sh BODY.md [PR-NUMBER]
#
# Environment: GITHUB_TOKEN (pull-requests: write), GITHUB_REPOSITORY (owner/name),
# GITHUB_API_URL (default https://api.github.com), and GITHUB_EVENT_PATH when no
# PR-NUMBER is given (the pull_request event's file). STRAINLINE_COMMENT_MARKER names
# the comment when one pull request gets several (default: strainline).
# The comment updated is the one that starts with the marker AND was written by this
# token's own account: STRAINLINE_COMMENT_AUTHOR if set, else the login GET /user
# names (a personal token), else github-actions[bot] (the workflow's GITHUB_TOKEN,
# which /user refuses). A reviewer who pastes the marker owns nothing.
set -eu

body_file=${1:?usage: comment.sh BODY.md [PR-NUMBER]}
pr=${2:-}
api=${GITHUB_API_URL:-https://api.github.com}
repo=${GITHUB_REPOSITORY:?GITHUB_REPOSITORY (owner/name) is not set}
token=${GITHUB_TOKEN:?GITHUB_TOKEN is not set: give the action a token with pull-requests: write}
marker="<!-- ${STRAINLINE_COMMENT_MARKER:-strainline} comment -->"

if [ -z "$pr" ]; then
  event=${GITHUB_EVENT_PATH:?no PR number given and GITHUB_EVENT_PATH is not set}
  pr=$(jq -r '.pull_request.number // .issue.number // empty' "$event")
  [ -n "$pr" ] || { echo "comment.sh: $event is not a pull request event (no pull_request.number)" >&2; exit 2; }
fi
case $pr in *[!0-9]*|'') echo "comment.sh: '$pr' is not a pull request number" >&2; exit 2;; esac

# GitHub refuses bodies over 65,536 characters: keep the head and say so.
payload=$(jq -Rs --arg m "$marker" '
  ($m + "\n" + .) as $b
  | if ($b | length) > 65000 then {body: ($b[0:64000] + "\n\n… (cut: the full report is in the run'"'"'s artifacts)")} else {body: $b} end
' "$body_file")

call() { # METHOD URL [DATA]
  if [ $# -ge 3 ]; then
    curl -fsS -X "$1" -H "Authorization: Bearer $token" -H "Accept: application/vnd.github+json" \
      -H "X-GitHub-Api-Version: 2022-11-28" -H "Content-Type: application/json" --data-binary "$3" "$2"
  else
    curl -fsS -X "$1" -H "Authorization: Bearer $token" -H "Accept: application/vnd.github+json" \
      -H "X-GitHub-Api-Version: 2022-11-28" "$2"
  fi
}

author=${STRAINLINE_COMMENT_AUTHOR:-}
if [ -z "$author" ]; then
  author=$(call GET "$api/user" 2>/dev/null | jq -r '.login // empty' 2>/dev/null || true)
  [ -n "$author" ] || author='github-actions[bot]'
fi

# Ours among the pull request's comments, 100 a page: the marker, and our own author.
id=""
page=1
while :; do
  list=$(call GET "$api/repos/$repo/issues/$pr/comments?per_page=100&page=$page")
  id=$(printf '%s' "$list" | jq -r --arg m "$marker" --arg a "$author" \
    '[.[] | select((.body // "" | startswith($m)) and (.user.login? == $a))][0].id // empty')
  n=$(printf '%s' "$list" | jq 'length')
  if [ -n "$id" ] || [ "$n" -lt 100 ]; then break; fi
  page=$((page + 1))
done

if [ -n "$id" ]; then
  call PATCH "$api/repos/$repo/issues/comments/$id" "$payload" >/dev/null
  echo "strainline: updated comment $id on pull request #$pr"
else
  call POST "$api/repos/$repo/issues/$pr/comments" "$payload" >/dev/null
  echo "strainline: commented on pull request #$pr"
fi
