//! The config file: defaults, every section, errors that name file, key and problem.

use super::*;

const SAMPLE: &str = r#"
listen = "127.0.0.1:8080"
[[agents]]
id = "assistant"
system_prompt = "You are a helpful assistant."
max_iterations = 8
[agents.model]
provider = "openai/v1/chat/completions"
model_id = "gpt-4o-mini"
base_url = "http://127.0.0.1:9400/v1"
api_key_env = "OPENAI_API_KEY"
[[agents.tools]]
type = "http"
name = "get_weather"
description = "Current weather for a city"
url = "http://127.0.0.1:9400/weather"
parameters = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }
"#;

fn env_with_key(k: &str) -> Option<String> {
    (k == "OPENAI_API_KEY").then(|| "sk-test".to_string())
}

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse_with_env(text, "gw.toml", None, &env_with_key)
}

#[test]
fn the_documented_shape_is_accepted() {
    let c = parse(SAMPLE).unwrap();
    assert_eq!(c.agents[0].max_iterations, 8);
    let ProviderConfig::OpenAi {
        api_key: Some(k), ..
    } = &c.agents[0].model.provider
    else {
        panic!()
    };
    assert_eq!(k.expose(), "sk-test");
    assert_eq!(format!("{k:?}"), "[REDACTED]");
    assert_eq!(c.agents[0].tools[0].name(), Some("get_weather"));
}

#[test]
fn the_embedded_default_loads() {
    let c = Config::load(None).unwrap();
    assert_eq!(c.listen.to_string(), "127.0.0.1:8080");
    assert!(matches!(
        c.agents[0].model.provider,
        ProviderConfig::Scripted { .. }
    ));
}

#[test]
fn errors_name_file_key_and_problem() {
    let e = parse(&SAMPLE.replace("openai/v1/chat/completions", "wat")).unwrap_err();
    assert_eq!(e.key, "agents[0].model.provider");
    assert!(
        e.to_string()
            .starts_with("config error in gw.toml: agents[0].model.provider: unknown provider")
    );
    let e = Config::parse_with_env(SAMPLE, "gw.toml", None, &|_| None).unwrap_err();
    assert_eq!(e.key, "agents[0].model.api_key_env");
    assert!(e.problem.contains("OPENAI_API_KEY"));
    let e = parse(&SAMPLE.replace("http://127.0.0.1:9400/weather", "not a url")).unwrap_err();
    assert_eq!(e.key, "agents[0].tools[0].url");
    let twice = format!(
        "{SAMPLE}\n{}",
        &SAMPLE[SAMPLE.find("[[agents]]").unwrap()..]
    );
    let e = parse(&twice).unwrap_err();
    assert_eq!(
        (e.key.as_str(), e.problem.contains("duplicate")),
        ("agents[1].id", true)
    );
    let e = parse(&SAMPLE.replace("max_iterations = 8", "max_iterations = \"8\"")).unwrap_err();
    assert_eq!(e.key, "agents[0].max_iterations");
    let e = parse(&SAMPLE.replace("system_prompt", "sytem_prompt")).unwrap_err();
    assert!(e.problem.contains("sytem_prompt"), "{e}");
    let e = parse("listen = [").unwrap_err();
    assert!(e.problem.starts_with("invalid TOML"));
}

#[test]
fn an_agent_tool_names_an_agent_of_the_file() {
    let two = "[[agents]]\nid = \"a\"\n[agents.model]\nprovider = \"scripted\"\n\
        [[agents.tools]]\ntype = \"agent\"\nname = \"ask_b\"\nagent_id = \"b\"\n\
        [[agents]]\nid = \"b\"\n[agents.model]\nprovider = \"scripted\"\n";
    let c = parse(two).unwrap();
    assert!(matches!(&c.agents[0].tools[0].kind,
        ToolKind::Agent { spec, agent_id } if spec.name == "ask_b" && agent_id == "b"));
    let e = parse(&two.replace("agent_id = \"b\"", "agent_id = \"zz\"")).unwrap_err();
    assert_eq!(e.key, "agents[0].tools[0].agent_id");
    assert!(e.problem.contains("zz"), "{e}");
}

#[test]
fn host_check_cors_and_outbound_defaults() {
    let c = parse("").unwrap();
    assert!(c.server.cors_origins.is_empty());
    assert_eq!(c.server.allowed_hosts, HostCheck::Loopback);
    assert!(c.server.allowed_hosts.allows("localhost:8080"));
    assert!(!c.server.allowed_hosts.allows("evil.example"));
    let mut c = parse("listen = \"0.0.0.0:8080\"").unwrap();
    assert_eq!(c.server.allowed_hosts, HostCheck::Any);
    c.set_listen("127.0.0.1:9".parse().unwrap());
    assert_eq!(c.server.allowed_hosts, HostCheck::Loopback);
    let mut c = parse("[server]\nallowed_hosts = [\"gw.example\"]").unwrap();
    c.set_listen("0.0.0.0:1".parse().unwrap());
    let h = &c.server.allowed_hosts;
    assert!(h.allows("GW.example:443") && h.allows("gw.example") && !h.allows("localhost"));
    let e = parse("[outbound]\ntrusted_endpoints = [\"(\"]").unwrap_err();
    assert_eq!(e.key, "outbound.trusted_endpoints");
    let e = parse("[outbound]\nallowed_cidrs = [\"10.0.0.0/40\"]").unwrap_err();
    assert_eq!(e.key, "outbound.allowed_cidrs");
}
