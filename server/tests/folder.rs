//! The picked folder's name in a manifest (`folder`): kept with the version, shown in the
//! version list, optional (older manifests have none) and refused when not one folder name.

mod common;

use common::*;
use serde_json::json;

#[test]
fn folder_name_is_kept_listed_optional_and_validated() {
    let dir = TempDir::new("folder");
    let s = Server::start(&dir.0);
    let t = s.token.clone();
    let url = s.repo_url("default", "/versions");
    let get = |path: &str| request("GET", &s.repo_url("default", path), Some(&t), &[], None).json();

    let named =
        json!({ "source": "Photos", "folder": "Photos 2024 (copy)", "time": 1, "entries": [] });
    let r = post_json(&url, &t, &named);
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let v = r.json();
    assert_eq!(v["folder"], "Photos 2024 (copy)");
    assert!(v["stats"].get("folder").is_none(), "{v}");
    let id = v["id"].as_i64().unwrap();

    // Without the field (as every manifest written before it): no folder anywhere.
    let r = post_json(
        &url,
        &t,
        &json!({ "source": "Photos", "time": 2, "entries": [] }),
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let v2 = r.json();
    assert!(v2.get("folder").is_none(), "{v2}");
    let id2 = v2["id"].as_i64().unwrap();

    let one = get(&format!("/versions/{id}"));
    assert_eq!(one["folder"], "Photos 2024 (copy)");
    assert_eq!(one["manifest"]["folder"], "Photos 2024 (copy)");
    let two = get(&format!("/versions/{id2}"));
    assert!(
        two.get("folder").is_none() && two["manifest"].get("folder").is_none(),
        "{two}"
    );

    let list = get("/versions");
    let rows = list["versions"].as_array().unwrap();
    assert_eq!(rows[0]["folder"], "Photos 2024 (copy)");
    assert!(rows[0]["stats"].get("folder").is_none(), "{list}");
    assert_eq!(rows[0]["stats"]["files"], 0);
    assert!(rows[1].get("folder").is_none(), "{list}");

    for bad in [
        json!(""),
        json!("a/b"),
        json!(".."),
        json!("x".repeat(257)),
        json!(7),
    ] {
        let m = json!({ "source": "Photos", "folder": bad, "time": 3, "entries": [] });
        let r = post_json(&url, &t, &m);
        assert_eq!(r.status, 400, "{bad}: {}", String::from_utf8_lossy(&r.body));
        assert!(r.json()["error"].is_string());
    }
    assert_eq!(get("/versions")["versions"].as_array().unwrap().len(), 2);
}
