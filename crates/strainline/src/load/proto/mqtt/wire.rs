//! The two MQTT versions strainline speaks behind one small vocabulary — the packets a
//! load client sends ([`Out`]) and those it waits for ([`In`]) — encoded and decoded by
//! rumqttc's codecs (`mqttbytes::v4` for 3.1.1, `v5::mqttbytes::v5` for 5). Publishers
//! and subscribers see only this vocabulary.

use bytes::{Bytes, BytesMut};
use rumqttc::mqttbytes::v4;
use rumqttc::v5::mqttbytes::v5;

/// The largest packet read from a broker (a delivery to a subscriber included).
const MAX_PACKET: usize = 16 * 1024 * 1024;

/// The protocol version of a run's clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V311,
    V5,
}

impl Version {
    pub fn name(self) -> &'static str {
        match self {
            Version::V311 => "3.1.1",
            Version::V5 => "5",
        }
    }
}

/// What a load client sends.
pub enum Out<'a> {
    Connect {
        id: String,
        keep_alive: u16,
        clean: bool,
        login: Option<(&'a str, &'a str)>,
    },
    Publish {
        topic: String,
        qos: u8,
        pkid: u16,
        payload: Bytes,
    },
    PubAck(u16),
    PubRec(u16),
    PubRel(u16),
    PubComp(u16),
    Subscribe {
        pkid: u16,
        filter: &'a str,
        qos: u8,
    },
    PingReq,
    Disconnect,
}

/// What a load client waits for. `ok: false` is a refusal by the broker (a failed
/// CONNACK, SUBACK or, in MQTT 5, a PUBACK/PUBREC with a reason code of 0x80 or more,
/// kept in `reason`).
#[derive(Debug, PartialEq)]
pub enum In {
    ConnAck {
        ok: bool,
    },
    PubAck {
        pkid: u16,
        reason: u8,
    },
    PubRec {
        pkid: u16,
        reason: u8,
    },
    PubComp {
        pkid: u16,
    },
    PubRel {
        pkid: u16,
    },
    SubAck {
        pkid: u16,
        ok: bool,
    },
    Publish {
        qos: u8,
        pkid: u16,
        topic: Bytes,
        payload: Bytes,
    },
    PingResp,
    Other,
}

fn qos4(q: u8) -> rumqttc::mqttbytes::QoS {
    match q {
        0 => rumqttc::mqttbytes::QoS::AtMostOnce,
        1 => rumqttc::mqttbytes::QoS::AtLeastOnce,
        _ => rumqttc::mqttbytes::QoS::ExactlyOnce,
    }
}

fn qos5(q: u8) -> rumqttc::v5::mqttbytes::QoS {
    match q {
        0 => rumqttc::v5::mqttbytes::QoS::AtMostOnce,
        1 => rumqttc::v5::mqttbytes::QoS::AtLeastOnce,
        _ => rumqttc::v5::mqttbytes::QoS::ExactlyOnce,
    }
}

/// Appends `out`, encoded for `v`, to `buf`.
pub fn encode(v: Version, out: Out<'_>, buf: &mut BytesMut) -> Result<(), ()> {
    match v {
        Version::V311 => encode4(out)
            .write(buf, MAX_PACKET)
            .map(|_| ())
            .map_err(|_| ()),
        Version::V5 => encode5(out)
            .write(buf, Some(MAX_PACKET as u32))
            .map(|_| ())
            .map_err(|_| ()),
    }
}

fn encode4(out: Out<'_>) -> v4::Packet {
    match out {
        Out::Connect {
            id,
            keep_alive,
            clean,
            login,
        } => {
            let mut c = v4::Connect::new(id);
            c.keep_alive = keep_alive;
            c.clean_session = clean;
            c.login = login.map(|(u, p)| v4::Login::new(u, p));
            v4::Packet::Connect(c)
        }
        Out::Publish {
            topic,
            qos,
            pkid,
            payload,
        } => {
            let mut p = v4::Publish::from_bytes(topic, qos4(qos), payload);
            p.pkid = pkid;
            v4::Packet::Publish(p)
        }
        Out::PubAck(id) => v4::Packet::PubAck(v4::PubAck::new(id)),
        Out::PubRec(id) => v4::Packet::PubRec(v4::PubRec::new(id)),
        Out::PubRel(id) => v4::Packet::PubRel(v4::PubRel::new(id)),
        Out::PubComp(id) => v4::Packet::PubComp(v4::PubComp::new(id)),
        Out::Subscribe { pkid, filter, qos } => {
            let mut s = v4::Subscribe::new(filter, qos4(qos));
            s.pkid = pkid;
            v4::Packet::Subscribe(s)
        }
        Out::PingReq => v4::Packet::PingReq,
        Out::Disconnect => v4::Packet::Disconnect,
    }
}

fn encode5(out: Out<'_>) -> v5::Packet {
    match out {
        Out::Connect {
            id,
            keep_alive,
            clean,
            login,
        } => v5::Packet::Connect(
            v5::Connect {
                keep_alive,
                client_id: id,
                clean_start: clean,
                properties: None,
            },
            None,
            login.map(|(u, p)| v5::Login::new(u, p)),
        ),
        Out::Publish {
            topic,
            qos,
            pkid,
            payload,
        } => {
            let mut p = v5::Publish::new(topic, qos5(qos), payload, None);
            p.pkid = pkid;
            v5::Packet::Publish(p)
        }
        Out::PubAck(id) => v5::Packet::PubAck(v5::PubAck::new(id, None)),
        Out::PubRec(id) => v5::Packet::PubRec(v5::PubRec::new(id, None)),
        Out::PubRel(id) => v5::Packet::PubRel(v5::PubRel::new(id, None)),
        Out::PubComp(id) => v5::Packet::PubComp(v5::PubComp::new(id, None)),
        Out::Subscribe { pkid, filter, qos } => {
            let mut s = v5::Subscribe::new(v5::Filter::new(filter, qos5(qos)), None);
            s.pkid = pkid;
            v5::Packet::Subscribe(s)
        }
        Out::PingReq => v5::Packet::PingReq(v5::PingReq),
        Out::Disconnect => v5::Packet::Disconnect(v5::Disconnect::new(
            v5::DisconnectReasonCode::NormalDisconnection,
        )),
    }
}

/// The next whole packet in `buf` (taken from it), `Ok(None)` when more bytes are
/// needed; `Err` for bytes that are not MQTT.
pub fn decode(v: Version, buf: &mut BytesMut) -> Result<Option<In>, ()> {
    match v {
        Version::V311 => match v4::Packet::read(buf, MAX_PACKET) {
            Ok(p) => Ok(Some(in4(p))),
            Err(rumqttc::mqttbytes::Error::InsufficientBytes(_)) => Ok(None),
            Err(_) => Err(()),
        },
        Version::V5 => match v5::Packet::read(buf, Some(MAX_PACKET as u32)) {
            Ok(p) => Ok(Some(in5(p))),
            Err(rumqttc::v5::mqttbytes::Error::InsufficientBytes(_)) => Ok(None),
            Err(_) => Err(()),
        },
    }
}

fn in4(p: v4::Packet) -> In {
    match p {
        v4::Packet::ConnAck(a) => In::ConnAck {
            ok: a.code == v4::ConnectReturnCode::Success,
        },
        v4::Packet::PubAck(a) => In::PubAck {
            pkid: a.pkid,
            reason: 0,
        },
        v4::Packet::PubRec(a) => In::PubRec {
            pkid: a.pkid,
            reason: 0,
        },
        v4::Packet::PubComp(a) => In::PubComp { pkid: a.pkid },
        v4::Packet::PubRel(a) => In::PubRel { pkid: a.pkid },
        v4::Packet::SubAck(a) => In::SubAck {
            pkid: a.pkid,
            ok: matches!(
                a.return_codes.first(),
                Some(v4::SubscribeReasonCode::Success(_))
            ),
        },
        v4::Packet::Publish(p) => In::Publish {
            qos: p.qos as u8,
            pkid: p.pkid,
            topic: p.topic.into(),
            payload: p.payload,
        },
        v4::Packet::PingResp => In::PingResp,
        _ => In::Other,
    }
}

fn in5(p: v5::Packet) -> In {
    match p {
        v5::Packet::ConnAck(a) => In::ConnAck {
            ok: a.code == v5::ConnectReturnCode::Success,
        },
        v5::Packet::PubAck(a) => In::PubAck {
            pkid: a.pkid,
            reason: puback_reason(&a.reason),
        },
        v5::Packet::PubRec(a) => In::PubRec {
            pkid: a.pkid,
            reason: if matches!(
                a.reason,
                v5::PubRecReason::Success | v5::PubRecReason::NoMatchingSubscribers
            ) {
                0
            } else {
                0x80
            },
        },
        v5::Packet::PubComp(a) => In::PubComp { pkid: a.pkid },
        v5::Packet::PubRel(a) => In::PubRel { pkid: a.pkid },
        v5::Packet::SubAck(a) => In::SubAck {
            pkid: a.pkid,
            ok: matches!(
                a.return_codes.first(),
                Some(v5::SubscribeReasonCode::Success(_))
            ),
        },
        v5::Packet::Publish(p) => In::Publish {
            qos: p.qos as u8,
            pkid: p.pkid,
            topic: p.topic,
            payload: p.payload,
        },
        v5::Packet::PingResp(_) => In::PingResp,
        _ => In::Other,
    }
}

/// An MQTT 5 PUBACK's reason code (0: success; 0x80 and above: refused).
fn puback_reason(r: &v5::PubAckReason) -> u8 {
    use v5::PubAckReason as R;
    match r {
        R::Success | R::NoMatchingSubscribers => 0,
        R::UnspecifiedError => 0x80,
        R::ImplementationSpecificError => 0x83,
        R::NotAuthorized => 0x87,
        R::TopicNameInvalid => 0x90,
        R::PacketIdentifierInUse => 0x91,
        R::QuotaExceeded => 0x97,
        R::PayloadFormatInvalid => 0x99,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A broker's bytes are not trusted: mutations of real packets, and their
    /// prefixes, decode to a packet, to "more bytes", or to an error — never a panic.
    #[test]
    fn hostile_bytes_never_panic_the_decoder() {
        let mut rng = crate::rng::Rng::new(26);
        for v in [Version::V311, Version::V5] {
            let mut seed = BytesMut::new();
            for out in [
                Out::Publish {
                    topic: "d/1/t".into(),
                    qos: 1,
                    pkid: 7,
                    payload: Bytes::from_static(b"{\"t\":21.5}"),
                },
                Out::PubAck(7),
                Out::PubRel(8),
                Out::PingReq,
            ] {
                encode(v, out, &mut seed).unwrap();
            }
            for _ in 0..3000 {
                let mut bytes = seed.to_vec();
                for _ in 0..1 + rng.index(3) {
                    let at = rng.index(bytes.len() + 1);
                    let which = rng.index(3);
                    rng.mutate_bytes(&mut bytes, at, which);
                }
                let cut = rng.below(bytes.len() as u64 + 1) as usize;
                let mut buf = BytesMut::from(&bytes[..cut]);
                while let Ok(Some(_)) = decode(v, &mut buf) {}
            }
        }
    }

    #[test]
    fn each_version_reads_back_what_it_wrote() {
        for v in [Version::V311, Version::V5] {
            let mut buf = BytesMut::new();
            for (qos, pkid) in [(0, 0), (1, 7), (2, 8)] {
                encode(
                    v,
                    Out::Publish {
                        topic: "d/1/t".into(),
                        qos,
                        pkid,
                        payload: Bytes::from_static(b"{\"t\":21.5}"),
                    },
                    &mut buf,
                )
                .unwrap();
            }
            // A partial packet asks for more bytes.
            let mut part = BytesMut::from(&buf[..3]);
            assert_eq!(decode(v, &mut part), Ok(None), "{v:?}");
            for (qos, pkid) in [(0, 0), (1, 7), (2, 8)] {
                assert_eq!(
                    decode(v, &mut buf),
                    Ok(Some(In::Publish {
                        qos,
                        pkid,
                        topic: Bytes::from_static(b"d/1/t"),
                        payload: Bytes::from_static(b"{\"t\":21.5}")
                    })),
                    "{v:?}"
                );
            }
            assert!(buf.is_empty());
        }
    }
}
