//! An MQTT URL, `mqtt[s]://[USER@]HOST[:PORT]/TOPIC[?options]`, checked into a
//! [`Target`]: the protocol's row of the registry ([`Mqtt`]).

use std::sync::Arc;

use super::super::super::spec::ClientOptions;
use super::super::{Ask, Protocol};
use super::wire::Version;
use super::{Broker, Mode, Target, CONNACK};

/// MQTT in the registry.
pub struct Mqtt;

impl Protocol for Mqtt {
    fn name(&self) -> &'static str {
        "MQTT"
    }

    fn schemes(&self) -> &'static [&'static str] {
        &["mqtt", "mqtts"]
    }

    fn tls_schemes(&self) -> &'static [&'static str] {
        &["mqtts"]
    }

    fn check(&self, url: &str) -> crate::error::Result<()> {
        parts(url).map(|_| ())
    }

    fn plan(&'static self, ask: &Ask<'_>) -> crate::error::Result<Arc<dyn super::super::Target>> {
        let url = ask.url;
        if ask.replay {
            return Err(bad(format!(
                "URL '{url}': a replay sends an access log's HTTP requests; an MQTT load publishes the body (-d) to the URL's topic, or a scenario's steps to theirs"
            )));
        }
        if ask.options.http2 {
            return Err(bad(format!("URL '{url}': --http2 is for HTTP, not MQTT")));
        }
        let mut t = target(url, ask.options)?;
        if t.mode == Mode::Connect && !ask.open {
            return Err(bad(
                "mode=conn connects clients at a rate, each staying connected until the run ends: give -q RATE (with -n N clients or -z DURATION)",
            ));
        }
        t.body = super::super::super::request::Body::of(ask.body);
        Ok(Arc::new(Broker(Arc::new(t))))
    }

    /// A step that names its reply topic (`?reply=TOPIC`) reads the message that
    /// answers it.
    fn keeps_bodies(&self) -> bool {
        true
    }

    fn label(&self, code: u16) -> String {
        match code {
            0 => "qos0 written".into(),
            1 => "qos1 puback".into(),
            2 => "qos2 pubcomp".into(),
            CONNACK => "connack".into(),
            // An MQTT 5 broker's refusal, by its reason code.
            _ => format!("refused {code:#04x}"),
        }
    }
}

fn bad(msg: impl std::fmt::Display) -> crate::Error {
    crate::Error::usage(msg.to_string())
}

/// An MQTT URL's parts, checked without resolving anything: what `check` checks of a
/// suite's MQTT URL, and the first half of [`target`].
struct Parts {
    tls: bool,
    user: Option<String>,
    hostport: String,
    topic: String,
    qos: u8,
    version: Version,
    keep_alive: u16,
    clean_session: bool,
    subscribers: u64,
    filter: Option<String>,
    mode: Mode,
}

fn parts(url: &str) -> Result<Parts, crate::Error> {
    let (tls, rest) = match url.strip_prefix("mqtts://") {
        Some(r) => (true, r),
        None => (false, url.trim_start_matches("mqtt://")),
    };
    let eg = "e.g. mqtt://127.0.0.1:1883/devices/{{client}}/telemetry?qos=1";
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let connect = query.split('&').any(|p| p == "mode=conn");
    let (authority, topic) = match rest.split_once('/') {
        Some(parts) => parts,
        None if connect => (rest, ""),
        None => return Err(bad(format!("URL '{url}' names no topic ({eg})"))),
    };
    let (user, hostport) = match authority.rsplit_once('@') {
        Some((u, _)) if u.contains(':') => {
            return Err(bad(format!(
                "URL '{}': give the password in STRAINLINE_MQTT_PASSWORD, not in the URL (a URL is printed and stored)",
                url.replace(u, "USER:…")
            )))
        }
        Some((u, h)) => (Some(u.to_string()), h),
        None => (None, authority),
    };
    if topic.is_empty() && !connect {
        return Err(bad(format!("URL '{url}' names no topic ({eg})")));
    }
    if super::wildcard(topic) || topic.contains('\0') {
        return Err(bad(format!(
            "URL '{url}': the topic '{topic}' has a wildcard (+ or #): a message is published to one topic; use {{{{client}}}} for one topic per client"
        )));
    }
    let mut qos = 1u8;
    let mut version = Version::V311;
    let mut keep_alive = 0u16;
    let mut clean_session = true;
    let mut subscribers = 0u64;
    let mut filter = None;
    let mut mode = Mode::Publish;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "mode" => {
                mode = match v {
                    "pub" => Mode::Publish,
                    "conn" => Mode::Connect,
                    _ => {
                        return Err(bad(format!(
                            "URL '{url}': mode={v}: give pub (a unit is a publish) or conn (a unit is a client connecting to stay)"
                        )))
                    }
                }
            }
            "qos" => {
                qos = match v {
                    "0" => 0,
                    "1" => 1,
                    "2" => 2,
                    _ => return Err(bad(format!("URL '{url}': qos={v}: give 0, 1 or 2"))),
                }
            }
            "version" => {
                version = match v {
                    "3.1.1" | "4" => Version::V311,
                    "5" => Version::V5,
                    _ => {
                        return Err(bad(format!(
                            "URL '{url}': version={v}: give 3.1.1 or 5"
                        )))
                    }
                }
            }
            "keep_alive" => {
                keep_alive = v.parse().map_err(|_| {
                    bad(format!(
                        "URL '{url}': keep_alive={v}: give seconds from 0 (off) to 65535"
                    ))
                })?
            }
            "clean" => {
                clean_session = v
                    .parse()
                    .map_err(|_| bad(format!("URL '{url}': clean={v}: give true or false")))?
            }
            "subscribers" => {
                subscribers = v
                    .parse()
                    .ok()
                    .filter(|n| *n <= crate::limits::CONNECTIONS.max as u64)
                    .ok_or_else(|| {
                        bad(format!(
                            "URL '{url}': subscribers={v}: give a count from 0 to {}",
                            crate::limits::CONNECTIONS.max
                        ))
                    })?
            }
            "filter" => {
                if v.is_empty() || v.contains('\0') {
                    return Err(bad(format!(
                        "URL '{url}': filter=: give the topic filter subscribers subscribe to, e.g. filter=devices/+/telemetry"
                    )));
                }
                filter = Some(v.to_string());
            }
            _ => {
                return Err(bad(format!(
                    "URL '{url}': unknown option '{k}' (the options are mode, qos, version, keep_alive, clean, subscribers, filter)"
                )))
            }
        }
    }
    if mode == Mode::Connect && subscribers > 0 {
        return Err(bad(format!(
            "URL '{url}': mode=conn connects clients that publish nothing: subscribers have nothing to receive"
        )));
    }
    Ok(Parts {
        tls,
        user,
        hostport: hostport.to_string(),
        topic: topic.to_string(),
        qos,
        version,
        keep_alive,
        clean_session,
        subscribers,
        filter,
        mode,
    })
}

/// An MQTT URL, `mqtt[s]://[USER@]HOST[:PORT]/TOPIC[?qos=0|1|2&keep_alive=S&clean=BOOL]`
/// (`mqtt://HOST/?mode=conn`: clients connecting, no topic): the broker resolved, TLS
/// set up, the topic and options checked.
fn target(url: &str, client: &ClientOptions) -> Result<Target, crate::Error> {
    let p = parts(url)?;
    let hostport = p.hostport.as_str();
    let port = if hostport.ends_with(']') || !hostport.contains(':') {
        format!(":{}", if p.tls { 8883 } else { 1883 })
    } else {
        String::new()
    };
    let scheme = if p.tls { "https" } else { "http" };
    let (target, _) = super::super::http::resolve(&format!("{scheme}://{hostport}{port}/"), client)
        .map_err(|e| e.context(format_args!("URL '{url}'")))?;
    let login = p.user.map(|u| {
        (
            u,
            client
                .password
                .as_ref()
                .map_or_else(String::new, |pw| pw.0.clone()),
        )
    });
    Ok(Target {
        addr: target.addr,
        tls: target.tls,
        // By default subscribers take every client's topic: `{{client}}` is `+`.
        filter: p
            .filter
            .unwrap_or_else(|| p.topic.replace("{{client}}", "+")),
        topic: p.topic,
        qos: p.qos,
        version: p.version,
        login,
        keep_alive: p.keep_alive,
        clean_session: p.clean_session,
        subscribers: p.subscribers,
        mode: p.mode,
        body: super::super::super::request::Body::Empty,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_s_defaults_are_qos_1_port_1883_and_every_client_s_topic() {
        let t = target(
            "mqtt://127.0.0.1/d/{{client}}/t?subscribers=2",
            &ClientOptions::default(),
        )
        .unwrap();
        assert_eq!(t.addr.port(), 1883);
        assert_eq!(t.qos, 1);
        assert_eq!(t.filter, "d/+/t");
        assert_eq!(t.subscribers, 2);
        assert_eq!(t.mode, Mode::Publish);
        // conn mode needs no topic.
        let t = target("mqtt://127.0.0.1/?mode=conn", &ClientOptions::default()).unwrap();
        assert_eq!(t.mode, Mode::Connect);
        assert!(target("mqtt://127.0.0.1/", &ClientOptions::default()).is_err());
    }
}
