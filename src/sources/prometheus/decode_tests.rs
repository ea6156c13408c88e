//! The streamed decode: the same texts whatever the key order, escapes read back, nothing
//! smuggled in.

use super::*;
use crate::config::ScrapeNode;
use crate::sources::prometheus::to_partial_from_api;

fn texts(body: &str) -> Result<Texts, String> {
    let mut t = Texts::default();
    t.add_vector(body, Options::PLAIN).map_err(|e| e.to_string())?;
    Ok(t)
}

#[test]
fn keys_in_any_order_give_the_same_lines() {
    let usual = r#"{"status":"success","data":{"resultType":"vector","result":[
      {"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","gpu":"0","instance":"h:9400"},"value":[1700000000.5,"87"]}]}}"#;
    let shuffled = r#"{"data":{"result":[
      {"value":[1700000000,"87"],"metric":{"instance":"h:9400","gpu":"0","__name__":"DCGM_FI_DEV_GPU_UTIL"}}],
      "resultType":"vector"},"warnings":["w1"],"status":"success"}"#;
    let a = texts(usual).unwrap_or_else(|e| panic!("{e}"));
    let b = texts(shuffled).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a.by_instance["h:9400"], "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",instance=\"h:9400\"} 87\n");
    assert_eq!(b.by_instance["h:9400"], "DCGM_FI_DEV_GPU_UTIL{instance=\"h:9400\",gpu=\"0\"} 87\n");
    assert_eq!(b.warnings, ["w1"]);
}

#[test]
fn escaped_json_strings_read_back_and_are_escaped_again() {
    let body = r#"{"status":"success","data":{"resultType":"vector","result":[
      {"metric":{"__name__":"DCGM_FI_DEV_GPU_TEMP","gpu":"0","instance":"h\u003a1","pod":"a\"b\\c\nd"},"value":[1,"64"]}]}}"#;
    let t = texts(body).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.by_instance["h:1"], "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",instance=\"h:1\",pod=\"a\\\"b\\\\c\\nd\"} 64\n");
}

#[test]
fn series_the_exposition_cannot_carry_are_dropped_and_counted() {
    // Each of these, written as it came, would have added a line (a card) of the answer's choosing.
    let body = r#"{"status":"success","data":{"resultType":"vector","result":[
      {"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","gpu":"0","instance":"h:1","a\"} 1\nDCGM_FI_DEV_GPU_UTIL{gpu=\"7\",instance=\"h:1":"x"},"value":[1,"5"]},
      {"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","gpu":"1","instance":"h:1"},"value":[1,"5\nDCGM_FI_DEV_GPU_UTIL{gpu=\"8\",instance=\"h:1\"} 9"]},
      {"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL{gpu=\"9\",instance=\"h:1\"} 1\nx","gpu":"2","instance":"h:1"},"value":[1,"5"]},
      {"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","gpu":"3","instance":"h:1"},"value":[1,"NaN"]}]}}"#;
    let t = texts(body).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.dropped, 3);
    assert_eq!(t.by_instance["h:1"].lines().count(), 1, "NaN is a number to the exposition: its series stays");
    let p = to_partial_from_api(body, ScrapeNode::Target).unwrap_or_else(|e| panic!("{e}"));
    let indexes: Vec<u32> = p.nodes.iter().flat_map(|n| n.cards.iter().map(|c| c.index)).collect();
    assert_eq!(indexes, [3], "no card of the answer's making");
    assert_eq!(p.nodes[0].cards[0].utilization_pct, None, "NaN is unknown");
    let note = p.note.unwrap_or_default();
    assert!(note.contains("3 series the exposition cannot carry"), "{note}");
}

#[test]
fn what_is_not_an_instant_vector_says_what_it_is() {
    let m = r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"x"},"values":[[1,"2"]]}]}}"#;
    assert_eq!(texts(m).map(|_| ()), Err("expected an instant vector, got matrix".into()));
    let s = r#"{"status":"success","data":{"resultType":"scalar","result":[1700000000,"3"]}}"#;
    assert_eq!(texts(s).map(|_| ()), Err("expected an instant vector, got scalar".into()));
    for none in [r#"{"status":"success"}"#, r#"{"status":"success","data":null}"#, r#"{"status":"success","data":{}}"#]
    {
        assert_eq!(texts(none).map(|_| ()), Err("Prometheus answered success without data".into()), "{none}");
    }
    let e = r#"{"status":"error","errorType":"timeout","error":"query timed out","data":null}"#;
    assert_eq!(texts(e).map(|_| ()), Err("Prometheus: timeout: query timed out".into()));
    for bad in ["", "[]", "{\"data\":{}}", "{\"status\":\"success\",\"data\":{\"result\":[{\"metric\":3}]}}", "{} x"] {
        let e = texts(bad).map(|_| ());
        assert!(e.as_ref().is_err_and(|e| e.starts_with("not a Prometheus API answer")), "{bad:?}: {e:?}");
    }
}
