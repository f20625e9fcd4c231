//! Request and reply over MQTT: a scenario step whose path names a reply topic
//! (`path = "devices/{{client}}/cmd?reply=devices/{{client}}/ack"`) subscribes its
//! client to that topic (QoS 0, once per client and topic), publishes, and ends when a
//! message arrives on it — the reply a flow extracts from and checks, as an HTTP
//! response's body. Its latency runs to the reply, from the step's intended time.

use bytes::Bytes;

use super::super::super::recorder::ErrorKind;
use super::super::super::request::Rendered;
use super::wire::{In, Out};
use super::Conn;

/// The most reply topics one client subscribes to; past it the connection is closed
/// after its unit and the driver opens a fresh one (sessions that each bring a topic
/// cannot grow a pooled connection's subscriptions without bound).
const MAX_REPLY_TOPICS: usize = 256;

/// The reply topic a step's path names (`?reply=TOPIC`), if it names one; a path
/// option that is not `reply`, or an empty one, is refused with the fix.
pub fn of(r: &Rendered) -> crate::error::Result<Option<&str>> {
    let Some((_, query)) = r.path.split_once('?') else {
        return Ok(None);
    };
    let mut reply = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("reply", t)) if !t.is_empty() && !t.contains('\0') => {
                if !filter_shape(t) {
                    return Err(crate::Error::usage(format!(
                        "reply={t}: a topic filter's + stands for a whole level and # for the last ones (e.g. ack/+/status, ack/#)"
                    )));
                }
                reply = Some(t)
            }
            _ => {
                return Err(crate::Error::usage(format!(
                    "the path's option '{pair}' is not one of an MQTT step's (reply=TOPIC: the topic its reply comes on)"
                )))
            }
        }
    }
    Ok(reply)
}

/// Whether `f` is a topic filter a broker takes (MQTT 3.1.1 §4.7.1): `+` alone in its
/// level, `#` alone in the last one.
fn filter_shape(f: &str) -> bool {
    let levels: Vec<&str> = f.split('/').collect();
    levels.iter().enumerate().all(|(i, l)| match *l {
        "+" => true,
        "#" => i == levels.len() - 1,
        l => !l.contains(['+', '#']),
    })
}

/// Subscribes `conn` to `filter` (QoS 0) unless it is already: SUBSCRIBE, then the
/// broker's SUBACK (a refusal is a `protocol` error).
pub async fn subscribe(conn: &mut Conn, filter: &str) -> Result<(), ErrorKind> {
    if conn.replies.contains(filter) {
        return Ok(());
    }
    if conn.replies.len() >= MAX_REPLY_TOPICS {
        conn.closed = true;
    }
    let pkid = conn.next_pkid();
    conn.send(Out::Subscribe {
        pkid,
        filter,
        qos: 0,
    })
    .await?;
    let ok = conn
        .answer(|p| match p {
            In::SubAck { pkid: id, ok } if *id == pkid => Some(*ok),
            _ => None,
        })
        .await?;
    if !ok {
        return Err(ErrorKind::Protocol);
    }
    conn.replies.insert(filter.to_string());
    Ok(())
}

/// The next message on a topic `filter` matches: one that came while the publish
/// was acknowledged, else the next delivered. Deliveries to the client's other reply
/// topics wait in its inbox.
pub async fn next(conn: &mut Conn, filter: &str) -> Result<Bytes, ErrorKind> {
    loop {
        if let Some(i) = conn.inbox.iter().position(|(t, _)| matches(filter, t)) {
            return Ok(conn.inbox.remove(i).map(|(_, p)| p).unwrap_or_default());
        }
        match conn.packet().await? {
            In::PingResp => {}
            In::Publish {
                qos,
                pkid,
                topic,
                payload,
            } => conn.delivered(qos, pkid, topic, payload).await?,
            _ => return Err(ErrorKind::Protocol),
        }
    }
}

/// Whether an MQTT topic filter (`+` one level, `#` every level below) matches
/// `topic`.
pub fn matches(filter: &str, topic: &[u8]) -> bool {
    let Ok(topic) = std::str::from_utf8(topic) else {
        return false;
    };
    let mut t = topic.split('/');
    for f in filter.split('/') {
        match (f, t.next()) {
            ("#", _) => return true,
            ("+", Some(_)) => {}
            (f, Some(level)) if f == level => {}
            _ => return false,
        }
    }
    t.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_match_topics_as_mqtt_says() {
        assert!(matches("a/b", b"a/b"));
        assert!(!matches("a/b", b"a/b/c"));
        assert!(!matches("a/b/c", b"a/b"));
        assert!(matches("a/+/c", b"a/x/c"));
        assert!(!matches("a/+/c", b"a/x/y/c"));
        assert!(matches("a/#", b"a/x/y"));
        assert!(matches("a/#", b"a"));
        assert!(matches("#", b"anything/at/all"));
        assert!(!matches("a/b", b"\xff"));
    }

    #[test]
    fn a_step_s_path_names_its_reply_topic_and_nothing_else() {
        let step = |path: &str| Rendered {
            method: hyper::Method::GET,
            path: path.into(),
            headers: vec![],
            body: Bytes::new(),
            keep: super::super::super::super::flow::Keep::Nothing,
        };
        assert_eq!(of(&step("/d/1/cmd")).unwrap(), None);
        assert_eq!(
            of(&step("/d/1/cmd?reply=d/1/ack")).unwrap(),
            Some("d/1/ack")
        );
        assert!(of(&step("/d/1/cmd?retain=1"))
            .unwrap_err()
            .to_string()
            .contains("reply=TOPIC"));
        assert!(of(&step("/d/1/cmd?reply=")).is_err());
        assert_eq!(of(&step("/c?reply=a/+/b")).unwrap(), Some("a/+/b"));
        assert_eq!(of(&step("/c?reply=a/#")).unwrap(), Some("a/#"));
        for bad in ["a/#/b", "a/b#", "a+/b"] {
            let e = of(&step(&format!("/c?reply={bad}")))
                .unwrap_err()
                .to_string();
            assert!(e.contains("a whole level"), "{bad}: {e}");
        }
    }
}
