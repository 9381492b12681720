//! `compression.type` on real brokers: the leader stores a topic's batches in the topic's
//! codec, recompressing a batch that came in another, and refuses a batch that would inflate
//! past its bound (a gzip bomb) without stopping; librdkafka and kafka-python read every codec
//! back.

mod common;

use bytes::Bytes;
use common::clients::{bootstrap, confluent_kafka_present, kafka_python_present, run_script};
use common::{kafka, TestCluster};
use isr_kafka::client::records::{encode, Outgoing};
use isr_kafka::compression::{recompress, Codec, MAX_DECOMPRESSED};
use kafka_protocol::records::Compression;
use std::time::Duration;

/// MESSAGE_TOO_LARGE.
const MESSAGE_TOO_LARGE: i16 = 10;

fn values(values: &[&str]) -> Vec<String> {
    values.iter().map(|v| v.to_string()).collect()
}

#[test]
fn a_topics_batches_are_stored_in_its_codec_and_a_bomb_is_refused() {
    let cluster = TestCluster::start(1);
    let b1 = cluster.address(1).expect("broker 1");
    let codecs = [
        ("producer", None),
        ("uncompressed", Some(Compression::None)),
        ("zstd", Some(Compression::Zstd)),
        ("snappy", Some(Compression::Snappy)),
    ];
    for (codec, _) in codecs {
        let code = kafka::create_topic_with(&b1, codec, 1, 1, &[("compression.type", codec)]);
        assert_eq!(code, 0, "CreateTopics with compression.type={codec}");
    }
    // One batch in gzip, one uncompressed, to each topic.
    let gzip = recompress(kafka::batch(&values(&["a", "b"])), Codec::Gzip).expect("gzip");
    for (topic, stored) in codecs {
        kafka::produce_batch(&b1, topic, 0, gzip.clone()).expect("the gzip batch");
        kafka::produce(&b1, topic, 0, &values(&["c"])).expect("the plain batch");
        let got = kafka::stored_codecs(&b1, topic, 0, 0);
        let want = match stored {
            Some(codec) => vec![codec, codec],
            None => vec![Compression::Gzip, Compression::None],
        };
        assert_eq!(got, want, "compression.type={topic}");
        let (read, _) = kafka::fetch(&b1, topic, 0, 0).expect("fetch");
        let read: Vec<(i64, &str)> = read.iter().map(|(o, v)| (*o, v.as_str())).collect();
        assert_eq!(
            read,
            [(0, "a"), (1, "b"), (2, "c")],
            "compression.type={topic}"
        );
    }
    // A record that inflates past the bound, in a few kilobytes of gzip.
    let huge = Outgoing {
        key: None,
        value: Bytes::from(vec![b'0'; MAX_DECOMPRESSED + 1]),
    };
    let bomb = recompress(encode(&[huge], 0).expect("encode"), Codec::Gzip).expect("gzip");
    assert!(bomb.len() < 1 << 20, "{} bytes", bomb.len());
    assert_eq!(
        kafka::produce_batch(&b1, "zstd", 0, bomb),
        Err(MESSAGE_TOO_LARGE)
    );
    // Stored as it came where nothing is recompressed; the broker is serving on.
    kafka::produce(&b1, "zstd", 0, &values(&["d"])).expect("the broker still writes");
    let (read, _) = kafka::fetch(&b1, "zstd", 0, 3).expect("fetch");
    assert_eq!(read.last().map(|(o, v)| (*o, v.as_str())), Some((3, "d")));
}

#[test]
fn real_clients_read_every_codec_back() {
    if !confluent_kafka_present() || !kafka_python_present() {
        return;
    }
    let cluster = TestCluster::start(3);
    let out = run_script(
        "compressed_topics.py",
        &[&bootstrap(&cluster)],
        Duration::from_secs(180),
    );
    eprintln!("{out}");
}
