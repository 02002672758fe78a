//! Tests of metrics: recording, clamping, the series, error examples, merge and
//! serialization.

use super::*;
use proptest::prelude::*;

fn roundtrip(m: &Metrics) -> Metrics {
    serde_json::from_str(&serde_json::to_string(m).expect("serializes")).expect("parses")
}

#[test]
fn names_are_unique_and_match_serde() {
    for h in Hist::ALL {
        assert_eq!(serde_json::to_value(h).expect("ser"), h.name());
    }
    for c in Counter::ALL {
        assert_eq!(serde_json::to_value(c).expect("ser"), c.name());
    }
    for k in ErrorKind::ALL {
        assert_eq!(serde_json::to_value(k).expect("ser"), k.name());
        assert!(!k.describe().is_empty());
    }
    for (i, h) in Hist::ALL.iter().enumerate() {
        assert_eq!(*h as usize, i);
    }
    for (i, c) in Counter::ALL.iter().enumerate() {
        assert_eq!(*c as usize, i);
    }
    for (i, k) in ErrorKind::ALL.iter().enumerate() {
        assert_eq!(*k as usize, i);
    }
}

#[test]
fn records_totals_and_series() {
    let mut m = Metrics::new();
    for v in 1..=100 {
        m.record(3, Hist::EndToEnd, v * 1_000);
    }
    m.record(5, Hist::Connect, 2_000);
    m.add(3, Counter::Sent, 10);
    m.add(4, Counter::Sent, 5);
    m.gauge_online(4, 7);
    m.gauge_online(4, 3);
    assert_eq!(m.hist(Hist::EndToEnd).len(), 100);
    assert_eq!(m.hist(Hist::Connect).len(), 1);
    assert_eq!(m.count(Counter::Sent), 15);
    let rows: Vec<SecondRow> = m.seconds().collect();
    // Connect has no per-second series, so second 5 was never created.
    assert_eq!(rows.iter().map(|r| r.sec).collect::<Vec<_>>(), [3, 4]);
    assert_eq!(rows[0].count(Counter::Sent), 10);
    assert_eq!(rows[0].e2e.count, 100);
    assert!((50_000..50_400).contains(&rows[0].e2e.p50));
    assert!((99_000..99_800).contains(&rows[0].e2e.p99));
    assert_eq!(rows[0].ack, Percentiles::default());
    assert_eq!((rows[1].online, rows[1].count(Counter::Sent)), (10, 5));
}

#[test]
fn huge_values_saturate() {
    let mut m = Metrics::new();
    m.record(0, Hist::EndToEnd, u64::MAX);
    m.record(0, Hist::SendAck, 0);
    m.add(0, Counter::BytesIn, u64::MAX);
    m.add(0, Counter::BytesIn, 1);
    let h = m.hist(Hist::EndToEnd);
    assert_eq!(h.len(), 1);
    assert!(h.max() >= MAX_US && h.max() < MAX_US + MAX_US / 1000);
    assert_eq!(m.count(Counter::BytesIn), u64::MAX);
    let row = m.seconds().next_back().expect("a second");
    assert!(row.e2e.max >= MAX_US && row.e2e.max < MAX_US + MAX_US / 100);
    assert_eq!(roundtrip(&m), m);
}

#[test]
fn error_examples_are_bounded_and_lazy() {
    let mut m = Metrics::new();
    let mut calls = 0;
    for i in 0..20u32 {
        m.error(i / 4, ErrorKind::ConnectRefused, || {
            calls += 1;
            format!("127.0.0.1:{}: connection refused", 9000 + i)
        });
    }
    m.error(9, ErrorKind::Timeout, || "login timed out".into());
    m.error(9, ErrorKind::Timeout, || "login timed out".into());
    let errors: Vec<_> = m.errors().collect();
    assert_eq!(errors.len(), 2);
    let (kind, count, examples) = errors[0];
    assert_eq!(
        (kind, count, examples.len()),
        (ErrorKind::ConnectRefused, 20, 5)
    );
    assert_eq!(examples[0], "127.0.0.1:9000: connection refused");
    // Full after second 1 (seconds 0 and 1 hold 8 candidates): later seconds skip the call.
    assert_eq!(calls, 8);
    assert_eq!(
        errors[1],
        (ErrorKind::Timeout, 2, &["login timed out".to_string()][..])
    );
    let rows: Vec<SecondRow> = m.seconds().collect();
    assert_eq!(rows.iter().map(|r| r.errors).sum::<u64>(), 22);
}

/// Every second counts its errors by kind, and the kinds survive merging and the file.
#[test]
fn errors_are_counted_per_second_by_kind() {
    let mut a = Metrics::new();
    a.error(3, ErrorKind::ClosedByPeer, || "closed".into());
    a.error(3, ErrorKind::Timeout, || "timed out".into());
    let mut b = Metrics::new();
    b.error(3, ErrorKind::ClosedByPeer, || "closed".into());
    b.error(4, ErrorKind::AuthFailed, || "no".into());
    a.merge(&b);
    let rows: Vec<SecondRow> = roundtrip(&a).seconds().collect();
    let kinds = |r: &SecondRow| {
        ErrorKind::ALL
            .iter()
            .filter(|&&k| r.error_kinds[k as usize] > 0)
            .map(|&k| (k, r.error_kinds[k as usize]))
            .collect::<Vec<_>>()
    };
    assert_eq!((rows[0].sec, rows[0].errors), (3, 3));
    assert_eq!(
        kinds(&rows[0]),
        [(ErrorKind::ClosedByPeer, 2), (ErrorKind::Timeout, 1)]
    );
    assert_eq!(kinds(&rows[1]), [(ErrorKind::AuthFailed, 1)]);
    let v = serde_json::to_value(&a).expect("serializes");
    assert_eq!(
        v["seconds"][0]["error_kinds"],
        serde_json::json!({"closed_by_peer": 2, "timeout": 1})
    );
}

/// A file from before kinds were counted per second still reads (its seconds have a total
/// only); kinds adding up to more than the total are refused.
#[test]
fn seconds_without_kinds_read_and_inflated_kinds_are_refused() {
    let mut m = Metrics::new();
    m.error(1, ErrorKind::Timeout, || "t".into());
    let mut v = serde_json::to_value(&m).expect("serializes");
    v["seconds"][0]
        .as_object_mut()
        .expect("an object")
        .remove("error_kinds");
    let old: Metrics = serde_json::from_value(v.clone()).expect("reads");
    let row = old.seconds().next().expect("a second");
    assert_eq!((row.errors, row.error_kinds.iter().sum::<u64>()), (1, 0));
    v["seconds"][0]["error_kinds"] = serde_json::json!({"timeout": 2});
    let err = serde_json::from_value::<Metrics>(v).expect_err("refused");
    assert!(err.to_string().contains("add up to more"), "{err}");
}

#[test]
fn serialized_form_is_readable() {
    let mut m = Metrics::new();
    m.add(0, Counter::Sent, 2);
    m.record(0, Hist::EndToEnd, 1500);
    m.error(0, ErrorKind::Protocol, || "bad frame".into());
    let v = serde_json::to_value(&m).expect("serializes");
    assert_eq!(v["counters"]["sent"], 2);
    assert_eq!(v["counters"]["received"], 0);
    assert!(v["hists"]["end_to_end"]
        .as_str()
        .is_some_and(|s| !s.is_empty()));
    assert_eq!(v["errors"][0]["kind"], "protocol");
    assert_eq!(v["seconds"][0]["counters"], serde_json::json!({"sent": 2}));
    assert!(v["seconds"][0].get("ack").is_none());
}

#[test]
fn bad_files_are_rejected() {
    let good = serde_json::to_value(Metrics::new()).expect("serializes");
    let mut v = good.clone();
    v["counters"]["nonsense"] = 1.into();
    assert!(serde_json::from_value::<Metrics>(v).is_err());
    let mut v = good.clone();
    v["hists"]["connect"] = "not base64!".into();
    assert!(serde_json::from_value::<Metrics>(v).is_err());
    let mut other = Vec::new();
    V2DeflateSerializer::new()
        .serialize(
            &Histogram::<u64>::new_with_bounds(1, 1000, 2).expect("bounds"),
            &mut other,
        )
        .expect("serializes");
    let mut v = good.clone();
    v["hists"]["connect"] = base64::engine::general_purpose::STANDARD
        .encode(other)
        .into();
    assert!(serde_json::from_value::<Metrics>(v).is_err());
    let mut v = good;
    v["seconds"] = serde_json::json!([{"sec": 2}, {"sec": 1}]);
    assert!(serde_json::from_value::<Metrics>(v).is_err());
}

/// One recording.
#[derive(Debug, Clone)]
enum Ev {
    Record(u32, Hist, u64),
    Add(u32, Counter, u64),
    Error(u32, ErrorKind, u8),
    Online(u32, u64),
}

impl Ev {
    fn apply(&self, m: &mut Metrics) {
        match *self {
            Ev::Record(s, h, us) => m.record(s, h, us),
            Ev::Add(s, c, n) => m.add(s, c, n),
            Ev::Error(s, k, t) => m.error(s, k, || format!("failure {t}")),
            Ev::Online(s, n) => m.gauge_online(s, n),
        }
    }
}

fn event() -> impl Strategy<Value = Ev> {
    let hist = prop::sample::select(Hist::ALL.to_vec());
    let counter = prop::sample::select(Counter::ALL.to_vec());
    let kind = prop::sample::select(ErrorKind::ALL[..3].to_vec());
    let us = prop_oneof![0u64..10_000, any::<u64>()];
    prop_oneof![
        4 => (0u32..8, hist, us).prop_map(|(s, h, us)| Ev::Record(s, h, us)),
        2 => (0u32..8, counter, 0u64..1_000).prop_map(|(s, c, n)| Ev::Add(s, c, n)),
        2 => (0u32..8, kind, 0u8..9).prop_map(|(s, k, t)| Ev::Error(s, k, t)),
        1 => (0u32..8, 0u64..100).prop_map(|(s, n)| Ev::Online(s, n)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn merge_equals_one_metrics(
        events in prop::collection::vec(event(), 0..300),
        split in prop::collection::vec(any::<bool>(), 300),
    ) {
        let (mut one, mut a, mut b) = (Metrics::new(), Metrics::new(), Metrics::new());
        for (e, left) in events.iter().zip(&split) {
            e.apply(&mut one);
            e.apply(if *left { &mut a } else { &mut b });
        }
        a.merge(&b);
        for h in Hist::ALL {
            let got: Vec<(u64, u64)> =
                a.hist(h).iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect();
            let want: Vec<(u64, u64)> =
                one.hist(h).iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect();
            prop_assert_eq!(got, want);
        }
        prop_assert_eq!(&a, &one);
        prop_assert_eq!(a.seconds().collect::<Vec<_>>(), one.seconds().collect::<Vec<_>>());
        let back = roundtrip(&a);
        prop_assert_eq!(&back, &one);
        prop_assert_eq!(
            serde_json::to_string(&back).expect("serializes"),
            serde_json::to_string(&one).expect("serializes")
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Recorders hand the seconds that are over to one merged series (packed) at
    /// any point, events still arrive for those seconds afterwards, and the merge of
    /// everything is the same metrics.
    #[test]
    fn moving_seconds_out_keeps_the_merge_exact(
        events in prop::collection::vec(event(), 0..300),
        split in prop::collection::vec(any::<bool>(), 300),
        moves in prop::collection::vec(prop::option::weighted(0.1, 0u32..9), 300),
    ) {
        let (mut one, mut a, mut b, mut series) =
            (Metrics::new(), Metrics::new(), Metrics::new(), Metrics::new());
        for ((e, left), at) in events.iter().zip(&split).zip(&moves) {
            e.apply(&mut one);
            e.apply(if *left { &mut a } else { &mut b });
            if let Some(sec) = *at {
                a.move_series_before(sec, &mut series);
                b.move_series_before(sec, &mut series);
            }
        }
        series.merge(&a);
        series.merge(&b);
        prop_assert_eq!(&series, &one);
        prop_assert_eq!(series.seconds().collect::<Vec<_>>(), one.seconds().collect::<Vec<_>>());
        prop_assert_eq!(
            serde_json::to_string(&series).expect("serializes"),
            serde_json::to_string(&one).expect("serializes")
        );
    }
}

/// A forged histogram whose header asks for a huge payload, plain and deflated.
fn forged_histograms(payload_len: u32) -> [Vec<u8>; 2] {
    let mut plain = Vec::new();
    plain.extend_from_slice(&0x1c84_9313u32.to_be_bytes());
    plain.extend_from_slice(&payload_len.to_be_bytes());
    plain.extend_from_slice(&0u32.to_be_bytes());
    plain.extend_from_slice(&u32::from(SIGFIG).to_be_bytes());
    plain.extend_from_slice(&1u64.to_be_bytes());
    plain.extend_from_slice(&MAX_US.to_be_bytes());
    plain.extend_from_slice(&1f64.to_be_bytes());
    plain.extend_from_slice(&[2, 0]);
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut z, &plain).unwrap();
    let deflated = z.finish().unwrap();
    let mut compressed = Vec::new();
    compressed.extend_from_slice(&0x1c84_9314u32.to_be_bytes());
    compressed.extend_from_slice(&(deflated.len() as u32).to_be_bytes());
    compressed.extend_from_slice(&deflated);
    [plain, compressed]
}

#[test]
fn a_histogram_header_asking_for_gigabytes_is_refused_before_allocating() {
    // Found by the artifact fuzz target: the deserializer allocated the header's payload
    // length (3.6 GB there) before reading any payload.
    for bytes in forged_histograms(3_674_341_458) {
        let err = hist_bytes::decode(&bytes, &new_hist()).unwrap_err();
        assert!(err.contains("longer than any histogram"), "{err}");
    }
    // The same header with an honest length reaches the deserializer (which then finds the
    // payload short), so the check refuses only what no histogram of these bounds needs.
    for bytes in forged_histograms(2) {
        assert!(hist_bytes::decode(&bytes, &new_hist()).is_ok());
    }
}

#[test]
fn a_histogram_of_other_bounds_is_refused() {
    let mut other = Histogram::<u64>::new_with_bounds(1, 1 << 40, 5).unwrap();
    other.record(7).unwrap();
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(&other, &mut bytes)
        .unwrap();
    let err = hist_bytes::decode(&bytes, &new_hist()).unwrap_err();
    assert!(err.contains("other bounds"), "{err}");
    for cut in [0, 3, 7, 20] {
        assert!(hist_bytes::decode(&bytes[..cut], &new_hist()).is_err());
    }
}

/// Cross-shard latencies merge, survive the file, and come out of the end-to-end histogram
/// exactly when their shard's clock is unknown; a file whose cross-shard latencies are not
/// in its end-to-end histogram is refused.
#[test]
fn cross_shard_latencies_are_kept_apart_and_can_be_taken_out() {
    let mut a = Metrics::new();
    a.record(0, Hist::EndToEnd, 1_000);
    a.record(0, Hist::EndToEnd, 5_000);
    a.record_cross(0, 1, 5_000);
    let mut b = Metrics::new();
    b.record(0, Hist::EndToEnd, 7_000);
    b.record_cross(1, 0, 7_000);
    b.record(0, Hist::EndToEnd, 8_000);
    b.record_cross(1, 2, 8_000);
    a.merge(&b);
    let mut m = roundtrip(&a);
    assert_eq!(m, a);
    assert_eq!(m.cross().count(), 3);
    assert_eq!(m.exclude_cross(&[2]), 1);
    assert_eq!(m.hist(Hist::EndToEnd).len(), 3);
    assert_eq!(m.exclude_cross(&[1]), 2);
    assert_eq!(m.hist(Hist::EndToEnd).len(), 1);
    assert_eq!(m.hist(Hist::EndToEnd).max(), m.hist(Hist::EndToEnd).min());

    let mut forged = Metrics::new();
    forged.record_cross(0, 1, 3_000);
    let v = serde_json::to_value(&forged).expect("serializes");
    let err = serde_json::from_value::<Metrics>(v).expect_err("refused");
    assert!(err.to_string().contains("cross_e2e"), "{err}");
}
