//! The parts of Kafka's consumer protocol that isr reads: the topics of a member's subscription
//! (its JoinGroup metadata) and the partitions of its assignment (the leader's SyncGroup
//! plan). Both are read within their bounds by hand, since a decoder that preallocates from
//! the counts on the wire would let one malformed member (or broker answer) exhaust memory;
//! anything malformed reads as empty.
//!
//! Layouts (every version): subscription = int16 version, array of topic strings, ...;
//! assignment = int16 version, array of (topic string, array of int32 partitions), ....

/// A bounded reader over big-endian fields.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Reader<'a> {
        // Skip the version.
        Reader { bytes, at: 2 }
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let taken = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(taken)
    }

    fn i16(&mut self) -> Option<i16> {
        self.take(2).map(|b| i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Option<i32> {
        self.take(4)
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn string(&mut self) -> Option<String> {
        let len = usize::try_from(self.i16()?).ok()?;
        self.take(len)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }

    /// An array count, no larger than the bytes left could hold.
    fn count(&mut self) -> Option<usize> {
        usize::try_from(self.i32()?)
            .ok()
            .filter(|&n| n <= self.bytes.len().saturating_sub(self.at))
    }
}

/// The topics a member subscribes to.
pub fn subscribed_topics(metadata: &[u8]) -> Vec<String> {
    let mut r = Reader::new(metadata);
    let Some(n) = r.count() else {
        return Vec::new();
    };
    (0..n).map_while(|_| r.string()).collect()
}

/// The partitions assigned to a member, by topic.
pub fn assigned_partitions(assignment: &[u8]) -> Vec<(String, Vec<i32>)> {
    let mut r = Reader::new(assignment);
    let Some(n) = r.count() else {
        return Vec::new();
    };
    let mut topics = Vec::new();
    for _ in 0..n {
        let Some(topic) = r.string() else { break };
        let Some(count) = r.count() else { break };
        let partitions: Vec<i32> = (0..count).map_while(|_| r.i32()).collect();
        topics.push((topic, partitions));
    }
    topics
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(s: &str) -> Vec<u8> {
        let mut b = (s.len() as i16).to_be_bytes().to_vec();
        b.extend_from_slice(s.as_bytes());
        b
    }

    #[test]
    fn reads_subscriptions_and_assignments_and_survives_garbage() {
        let mut m = vec![0, 1, 0, 0, 0, 2];
        m.extend(string("orders"));
        m.extend(string("pay"));
        m.extend_from_slice(&[0xff; 8]); // user data and the rest: not read
        assert_eq!(subscribed_topics(&m), ["orders", "pay"]);
        assert!(subscribed_topics(&[0, 1, 0x7f, 0xff, 0xff, 0xff]).is_empty());
        assert!(subscribed_topics(&[]).is_empty());

        let mut a = vec![0, 0, 0, 0, 0, 1];
        a.extend(string("orders"));
        a.extend_from_slice(&[0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3]);
        assert_eq!(assigned_partitions(&a), [("orders".to_owned(), vec![0, 3])]);
        a[14] = 0x7f; // a partition count of 2^31 or so
        assert_eq!(assigned_partitions(&a), []);
    }
}
