use super::*;

fn flags() -> Vec<(String, String)> {
    vec![
        ("secure-port".to_owned(), "10257".to_owned()),
        ("bind-address".to_owned(), "0.0.0.0".to_owned()),
    ]
}

fn get(pages: &Zpages, path: &str, accept: &str, query: Option<&str>) -> Page {
    let mut headers = HeaderMap::new();
    if !accept.is_empty() {
        headers.insert(header::ACCEPT, accept.parse().expect("header"));
    }
    pages
        .answer(&Method::GET, path, query, &headers)
        .unwrap_or_else(|| panic!("{path} not answered"))
}

fn body(r: Page) -> String {
    r.body
}

fn content_type(r: &Page) -> &str {
    &r.content_type
}

/// Upstream's negotiation, clause by clause (k8s.io/apiserver flagz/statusz handlers and
/// `NegotiateMediaTypeOptions`).
#[test]
fn negotiation_follows_upstream() {
    let json = |version, pretty| Format::Structured {
        yaml: false,
        version,
        pretty,
    };
    for (accept, query, agent, want) in [
        ("", None, "", Some(Format::Text)),
        ("text/plain", None, "", Some(Format::Text)),
        ("*/*", None, "", Some(Format::Text)),
        ("text/*", None, "", Some(Format::Text)),
        // A conversion is what the structured types need; plain text takes none.
        ("application/json", None, "", None),
        (
            "text/plain;as=Flagz;g=config.k8s.io;v=v1beta1",
            None,
            "",
            None,
        ),
        ("text/html", None, "", None),
        ("application/vnd.kubernetes.protobuf", None, "", None),
        (
            "application/json;as=Flagz;g=config.k8s.io;v=v1beta1",
            None,
            "",
            Some(json("v1beta1", false)),
        ),
        (
            "application/json;as=Flagz;g=config.k8s.io;v=v1alpha1",
            None,
            "curl/8.5.0",
            Some(json("v1alpha1", true)),
        ),
        (
            "application/json;as=Flagz;g=config.k8s.io;v=v1beta1",
            Some("pretty=true"),
            "",
            Some(json("v1beta1", true)),
        ),
        (
            "application/json;as=Flagz;g=config.k8s.io;v=v1beta1",
            Some("pretty=0"),
            "curl/8.5.0",
            Some(json("v1beta1", false)),
        ),
        (
            "application/json;as=Flagz;g=config.k8s.io;v=v2",
            None,
            "",
            None,
        ),
        (
            "application/json;as=Statusz;g=config.k8s.io;v=v1beta1",
            None,
            "",
            None,
        ),
        ("application/json;as=Flagz;v=v1beta1", None, "", None),
        (
            "application/yaml;as=Flagz;g=config.k8s.io;v=v1beta1",
            None,
            "",
            Some(Format::Structured {
                yaml: true,
                version: "v1beta1",
                pretty: false,
            }),
        ),
        // Best q first; an unacceptable clause falls through to the next.
        ("application/json, text/plain", None, "", Some(Format::Text)),
        (
            "text/plain;q=0.5, application/json;as=Flagz;g=config.k8s.io;v=v1beta1",
            None,
            "",
            Some(json("v1beta1", false)),
        ),
        (
            "application/json;as=Flagz;g=config.k8s.io;v=v1beta1;q=0.1, text/plain",
            None,
            "",
            Some(Format::Text),
        ),
    ] {
        assert_eq!(
            negotiate(accept, "Flagz", query, agent),
            want,
            "Accept: {accept} ?{query:?} UA {agent}"
        );
    }
}

#[test]
fn flagz_text_is_upstreams_page() {
    let pages = Zpages::new(true, false, &flags());
    let r = get(&pages, "/flagz", "", None);
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(content_type(&r), "text/plain; charset=utf-8");
    let text = body(r);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "");
    assert_eq!(lines[1], "rkcm flagz");
    assert!(lines[2].starts_with("Warning: This endpoint is not meant to be machine parseable"));
    // Sorted, with one of upstream's delimiters, the same one on every line and request.
    let delim = DELIMITERS
        .iter()
        .rev()
        .find(|d| lines[3] == format!("bind-address{d}0.0.0.0"))
        .unwrap_or_else(|| panic!("{:?}", lines[3]));
    assert_eq!(lines[4], format!("secure-port{delim}10257"));
    assert_eq!(lines.len(), 5);
    assert_eq!(body(get(&pages, "/flagz", "text/plain", None)), text);
}

#[test]
fn flagz_structured_is_upstreams_object() {
    let pages = Zpages::new(true, true, &flags());
    let r = get(
        &pages,
        "/flagz",
        "application/json;as=Flagz;g=config.k8s.io;v=v1beta1",
        None,
    );
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        content_type(&r),
        "application/json;g=config.k8s.io;v=v1beta1;as=Flagz"
    );
    assert!(r.warning.is_none());
    assert_eq!(
        body(r),
        "{\"kind\":\"Flagz\",\"apiVersion\":\"config.k8s.io/v1beta1\",\"metadata\":{\"name\":\
         \"rkcm\"},\"flags\":{\"bind-address\":\"0.0.0.0\",\"secure-port\":\"10257\"}}\n"
    );
    let r = get(
        &pages,
        "/flagz",
        "application/yaml;as=Flagz;g=config.k8s.io;v=v1alpha1",
        None,
    );
    assert_eq!(
        r.warning.as_deref(),
        Some(
            "299 - \"This version of the flagz endpoint is deprecated. Please use a newer \
             version.\""
        )
    );
    let yaml: serde_json::Value = serde_yaml::from_str(&body(r)).expect("yaml");
    assert_eq!(yaml["apiVersion"], "config.k8s.io/v1alpha1");
    assert_eq!(yaml["flags"]["secure-port"], "10257");
}

#[test]
fn unacceptable_is_upstreams_406() {
    let pages = Zpages::new(true, true, &flags());
    for path in ["/flagz", "/statusz"] {
        let r = get(&pages, path, "application/json", None);
        assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE);
        assert_eq!(content_type(&r), "application/json");
        assert_eq!(
            body(r),
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\
             \"message\":\"only the following media types are accepted: application/json, \
             application/yaml, text/plain\",\"reason\":\"NotAcceptable\",\"code\":406}\n"
        );
    }
}

#[test]
fn statusz_text_is_upstreams_page() {
    let s = Statusz {
        started: SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_948_631),
        go_version: "rustc <1.90>".to_owned(),
        binary_version: "0.1.0".to_owned(),
        paths: listed_paths(true),
    };
    let now = s.started + Duration::from_secs(3_725);
    let text = statusz_text(&s, now, ": ");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(&lines[..4], ["", "rkcm statusz", WARNING, ""]);
    assert!(lines[4].starts_with("Started:  "), "{text}");
    assert!(lines[4].ends_with(" 2025"), "{text}");
    assert_eq!(
        &lines[5..],
        [
            "Up:  1 hr 02 min 05 sec",
            "Go version:  rustc &lt;1.90&gt;",
            "Binary version:  0.1.0",
            "Emulation version:  1.37",
            "Paths:  /configz /flagz /healthz /livez /metrics /readyz",
        ]
    );
    assert_eq!(uptime(59), "0 hr 00 min 59 sec");
    assert_eq!(uptime(36_000 + 61), "10 hr 01 min 01 sec");
}

#[test]
fn statusz_structured_is_upstreams_object() {
    let pages = Zpages::new(false, true, &flags());
    let r = get(
        &pages,
        "/statusz",
        "application/json;as=Statusz;g=config.k8s.io;v=v1beta1",
        Some("pretty=1"),
    );
    assert_eq!(
        content_type(&r),
        "application/json;g=config.k8s.io;v=v1beta1;as=Statusz"
    );
    let text = body(r);
    assert!(
        text.starts_with("{\n  \"kind\": \"Statusz\",\n  \"apiVersion\""),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(v["metadata"]["name"], "rkcm");
    assert_eq!(v["binaryVersion"], env!("CARGO_PKG_VERSION"));
    assert_eq!(v["emulationVersion"], "1.37");
    assert!(v["uptimeSeconds"].is_u64());
    let start = v["startTime"].as_str().expect("startTime");
    assert!(start.ends_with('Z') && start.len() == 20, "{start}");
    // No /flagz listed when its gate is off.
    assert_eq!(
        v["paths"],
        serde_json::json!(["/configz", "/healthz", "/livez", "/metrics", "/readyz"])
    );
}

/// A gate off: the page is not there (the router then answers 404); other paths and other
/// methods are not these pages'.
#[test]
fn gates_and_paths() {
    let none = Zpages::new(false, false, &flags());
    let both = Zpages::new(true, true, &flags());
    let headers = HeaderMap::new();
    for path in ["/flagz", "/statusz"] {
        assert!(none.answer(&Method::GET, path, None, &headers).is_none());
        assert!(both.answer(&Method::GET, path, None, &headers).is_some());
        assert!(both.answer(&Method::POST, path, None, &headers).is_none());
    }
    assert!(
        both.answer(&Method::GET, "/flagz/x", None, &headers)
            .is_none()
    );
    assert!(
        both.answer(&Method::GET, "/metrics", None, &headers)
            .is_none()
    );
    assert!(
        Zpages::default()
            .answer(&Method::GET, "/flagz", None, &headers)
            .is_none()
    );
}
