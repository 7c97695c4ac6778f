//! The rate limit configuration: the YAML files of envoyproxy/ratelimit, as they are
//! (domains, descriptors nested by key and value, a key without value matching any
//! value, wildcards, `rate_limit {unit, requests_per_unit, unlimited, name, replaces}`,
//! `shadow_mode`, `detailed_metric`, `value_to_metric`, `share_threshold`), validated
//! with the same rules and the same messages, and looked up the way the reference
//! service looks a descriptor up (the most specific match at the request's depth).

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use serde::Deserialize;
use serde_yaml_ng::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// The time units of a limit, with the length of their window in seconds: the
/// reference's dividers (a month is 30 days, a year 365 days), windows aligned to the
/// Unix epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Year,
}

impl Unit {
    /// A unit named as the configuration names it (any case); `None` for anything
    /// else, `UNKNOWN` included.
    pub fn parse(name: &str) -> Option<Unit> {
        Some(match name.to_ascii_uppercase().as_str() {
            "SECOND" => Unit::Second,
            "MINUTE" => Unit::Minute,
            "HOUR" => Unit::Hour,
            "DAY" => Unit::Day,
            "WEEK" => Unit::Week,
            "MONTH" => Unit::Month,
            "YEAR" => Unit::Year,
            _ => return None,
        })
    }

    /// The unit of a `RateLimitUnit` / `RateLimitResponse.RateLimit.Unit` number (the
    /// two enums share their numbers).
    pub fn from_proto(n: i32) -> Option<Unit> {
        Some(match n {
            1 => Unit::Second,
            2 => Unit::Minute,
            3 => Unit::Hour,
            4 => Unit::Day,
            5 => Unit::Month,
            6 => Unit::Year,
            7 => Unit::Week,
            _ => return None,
        })
    }

    pub fn to_proto(self) -> i32 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 2,
            Unit::Hour => 3,
            Unit::Day => 4,
            Unit::Month => 5,
            Unit::Year => 6,
            Unit::Week => 7,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Unit::Second => "SECOND",
            Unit::Minute => "MINUTE",
            Unit::Hour => "HOUR",
            Unit::Day => "DAY",
            Unit::Week => "WEEK",
            Unit::Month => "MONTH",
            Unit::Year => "YEAR",
        }
    }

    /// The window's length in seconds.
    pub fn seconds(self) -> u64 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 60,
            Unit::Hour => 3_600,
            Unit::Day => 86_400,
            Unit::Week => 7 * 86_400,
            Unit::Month => 30 * 86_400,
            Unit::Year => 365 * 86_400,
        }
    }
}

/// One configured limit (a `rate_limit` block), or a limit a request brought.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    /// The stats key of the descriptor that holds it: `domain.key_value.key`.
    pub full_key: String,
    pub requests_per_unit: u32,
    /// `None` only for an unlimited rule.
    pub unit: Option<Unit>,
    pub unlimited: bool,
    pub shadow_mode: bool,
    pub name: String,
    pub replaces: Vec<String>,
    pub detailed_metric: bool,
}

/// A descriptor's match: the rule, the stats key its counters go under, and for each
/// entry matched by a wildcard with `share_threshold`, the pattern that stands for its
/// value in the Redis key.
#[derive(Clone, Debug)]
pub struct Matched {
    pub rule: Arc<Rule>,
    pub stats_key: String,
    pub shared: Vec<Option<String>>,
}

#[derive(Debug)]
pub enum Lookup {
    /// The domain is not configured.
    UnknownDomain,
    /// No rule applies to this descriptor.
    NoRule,
    Found(Matched),
}

#[derive(Debug, Default)]
struct Node {
    /// Children by `key` or `key_value` (the value may hold `*` wildcards).
    children: HashMap<String, Node>,
    /// The children whose value holds a `*`, in file order, split at each `*`.
    wildcards: Vec<(String, Vec<String>)>,
    rule: Option<Arc<Rule>>,
    value_to_metric: bool,
    share_threshold: bool,
}

/// A loaded configuration: every domain of every file.
#[derive(Debug, Default)]
pub struct Config {
    domains: HashMap<String, Node>,
}

/// A configuration error: the file's name (as the reference names it: its path under
/// the runtime directory, `/` as `.`, without extension) and what is wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn err(file: &str, what: impl std::fmt::Display) -> ConfigError {
    ConfigError(format!("{file}: {what}"))
}

/// The keys a configuration file may use, at any level (as the reference checks them).
const VALID_KEYS: &[&str] = &[
    "domain",
    "key",
    "value",
    "descriptors",
    "rate_limit",
    "unit",
    "requests_per_unit",
    "unlimited",
    "shadow_mode",
    "quota_mode",
    "name",
    "replaces",
    "detailed_metric",
    "value_to_metric",
    "share_threshold",
    "metadata",
];

#[derive(Deserialize, Default)]
struct YamlRoot {
    #[serde(default, deserialize_with = "scalar")]
    domain: String,
    #[serde(default)]
    descriptors: Option<Vec<YamlDescriptor>>,
}

#[derive(Deserialize, Default)]
struct YamlDescriptor {
    #[serde(default, deserialize_with = "scalar")]
    key: String,
    #[serde(default, deserialize_with = "scalar")]
    value: String,
    #[serde(default)]
    rate_limit: Option<YamlRateLimit>,
    #[serde(default)]
    descriptors: Option<Vec<YamlDescriptor>>,
    #[serde(default)]
    shadow_mode: Option<bool>,
    #[serde(default)]
    quota_mode: Option<bool>,
    #[serde(default)]
    detailed_metric: Option<bool>,
    #[serde(default)]
    value_to_metric: Option<bool>,
    #[serde(default)]
    share_threshold: Option<bool>,
}

#[derive(Deserialize, Default)]
struct YamlRateLimit {
    #[serde(default)]
    requests_per_unit: Option<u32>,
    #[serde(default, deserialize_with = "scalar")]
    unit: String,
    #[serde(default)]
    unlimited: Option<bool>,
    #[serde(default, deserialize_with = "scalar")]
    name: String,
    #[serde(default)]
    replaces: Option<Vec<YamlReplaces>>,
}

#[derive(Deserialize, Default)]
struct YamlReplaces {
    #[serde(default, deserialize_with = "scalar")]
    name: String,
}

/// A scalar read as the text it was written as (`value: 123` is the value "123"), null
/// as the empty string: what the reference's YAML decoder does for a string field.
fn scalar<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    use serde::de::Error;
    match Value::deserialize(d)? {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Number(n) => Ok(n.to_string()),
        other => Err(D::Error::custom(format!(
            "expected a string, found {}",
            kind(&other)
        ))),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a map",
        Value::Tagged(_) => "a tagged value",
    }
}

/// Every key of every map is one the format knows (the values under `metadata` are
/// free), and lists hold maps: the reference's check, with its messages.
fn validate_keys(file: &str, map: &serde_yaml_ng::Mapping) -> Result<(), ConfigError> {
    for (k, v) in map {
        let Some(k) = k.as_str() else {
            return Err(err(
                file,
                format!("config error, key is not of type string: {k:?}"),
            ));
        };
        if !VALID_KEYS.contains(&k) {
            return Err(err(file, format!("config error, unknown key '{k}'")));
        }
        if k == "metadata" {
            continue;
        }
        match v {
            Value::Sequence(items) => {
                for item in items {
                    let Value::Mapping(m) = item else {
                        return Err(err(
                            file,
                            format!(
                                "config error, yaml file contains list of type other than map: {item:?}"
                            ),
                        ));
                    };
                    validate_keys(file, m)?;
                }
            }
            Value::Mapping(m) => validate_keys(file, m)?,
            Value::Tagged(_) => return Err(err(file, "error checking config")),
            _ => {}
        }
    }
    Ok(())
}

/// Whether `value` matches `parts` (a pattern split at each `*`; each `*` matches any
/// run of characters, the empty one included).
fn wildcard_match(parts: &[String], value: &str) -> bool {
    let (Some(first), Some(last)) = (parts.first(), parts.last()) else {
        return false;
    };
    if parts.len() == 1 {
        return first == value;
    }
    if !value.starts_with(first.as_str()) || !value.ends_with(last.as_str()) {
        return false;
    }
    let fixed: usize = parts.iter().map(String::len).sum();
    if value.len() < fixed {
        return false;
    }
    let mut rest = &value[first.len()..value.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part.as_str()) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

impl Config {
    /// A configuration from files given as (name, YAML text), in order; the first
    /// error stops the load. `merge_domains`: several files may add to one domain
    /// (`MERGE_DOMAIN_CONFIG`), otherwise a domain in two files is an error.
    pub fn load(files: &[(String, String)], merge_domains: bool) -> Result<Config, ConfigError> {
        let mut config = Config::default();
        for (name, text) in files {
            let root = parse_file(name, text)?;
            if root.domain.is_empty() {
                return Err(err(name, "config file cannot have empty domain"));
            }
            let descriptors = root.descriptors.unwrap_or_default();
            match config.domains.get_mut(&root.domain) {
                Some(_) if !merge_domains => {
                    return Err(err(
                        name,
                        format!("duplicate domain '{}' in config file", root.domain),
                    ))
                }
                Some(node) => {
                    load_descriptors(node, name, &format!("{}.", root.domain), &descriptors)?
                }
                None => {
                    let mut node = Node::default();
                    load_descriptors(&mut node, name, &format!("{}.", root.domain), &descriptors)?;
                    config.domains.insert(root.domain.clone(), node);
                }
            }
        }
        Ok(config)
    }

    pub fn domain_count(&self) -> usize {
        self.domains.len()
    }

    /// Every rule, as `full_key: unit=U requests_per_unit=N, ...` lines (the
    /// reference's `/rlconfig` dump), sorted.
    pub fn dump(&self) -> String {
        fn walk(node: &Node, out: &mut Vec<String>) {
            if let Some(r) = &node.rule {
                out.push(format!(
                    "{}: unit={} requests_per_unit={}, shadow_mode: {}, unlimited: {}",
                    r.full_key,
                    r.unit.map_or("UNKNOWN", Unit::name),
                    r.requests_per_unit,
                    r.shadow_mode,
                    r.unlimited
                ));
            }
            for child in node.children.values() {
                walk(child, out);
            }
        }
        let mut lines = Vec::new();
        for node in self.domains.values() {
            walk(node, &mut lines);
        }
        lines.sort();
        lines.iter().map(|l| format!("{l}\n")).collect()
    }

    /// The rule a descriptor (its entries, in order) gets in `domain`, as the reference
    /// finds it: at each level the entry's `key_value` first, then a wildcard value, then
    /// the bare `key`; a rule applies only at the request's depth.
    pub fn lookup(&self, domain: &str, entries: &[Entry]) -> Lookup {
        let Some(root) = self.domains.get(domain) else {
            return Lookup::UnknownDomain;
        };
        let mut level = root;
        let mut by_value = String::from(domain);
        let mut shared: Vec<Option<String>> = vec![None; entries.len()];
        let mut found: Option<Arc<Rule>> = None;
        for (i, Entry { key, value }) in entries.iter().enumerate() {
            let key_value = format!("{key}_{value}");
            let mut next = level.children.get(&key_value);
            let mut wildcard: Option<&str> = None;
            if next.is_none() {
                if let Some((pattern, _)) = level
                    .wildcards
                    .iter()
                    .find(|(_, parts)| wildcard_match(parts, &key_value))
                {
                    next = level.children.get(pattern);
                    wildcard = Some(pattern.as_str());
                }
            }
            let by_exact_value = next.is_some();
            if next.is_none() {
                next = level.children.get(key);
            }
            by_value.push('.');
            by_value.push_str(key);
            let Some(n) = next else { break };
            let shown: &str = match wildcard {
                Some(w) => {
                    // The pattern's value: the child's key without `key_`.
                    let pattern = w.strip_prefix(&format!("{key}_")).unwrap_or(w);
                    if n.share_threshold {
                        shared[i] = Some(pattern.to_string());
                        pattern
                    } else if n.value_to_metric {
                        value
                    } else {
                        pattern
                    }
                }
                None if by_exact_value || n.value_to_metric => value,
                None => "",
            };
            if !shown.is_empty() {
                by_value.push('_');
                by_value.push_str(shown);
            }
            if let Some(rule) = &n.rule {
                if i + 1 == entries.len() {
                    found = Some(rule.clone());
                }
            }
            if n.children.is_empty() {
                break;
            }
            level = n;
        }
        let Some(rule) = found else {
            return Lookup::NoRule;
        };
        // A rule is found only at the last entry: the loop went over every entry.
        let any_shared = shared.iter().any(Option::is_some);
        let stats_key = if rule.detailed_metric {
            // `domain.key_value...`, a shared entry's value as its pattern; an empty
            // value is written `key_`, or `key` when an entry is shared.
            let mut k = String::from(domain);
            for (Entry { key, value }, pattern) in entries.iter().zip(&shared) {
                k.push('.');
                k.push_str(key);
                match pattern {
                    Some(p) => {
                        k.push('_');
                        k.push_str(p);
                    }
                    None if any_shared && value.is_empty() => {}
                    None => {
                        k.push('_');
                        k.push_str(value);
                    }
                }
            }
            k
        } else {
            by_value
        };
        Lookup::Found(Matched {
            rule,
            stats_key,
            shared: if any_shared { shared } else { Vec::new() },
        })
    }
}

/// The stats key of a descriptor that brought its own limit: `domain.key_value.key2`.
pub fn override_key(domain: &str, entries: &[Entry]) -> String {
    let mut k = String::from(domain);
    for Entry { key, value } in entries {
        k.push('.');
        k.push_str(key);
        if !value.is_empty() {
            k.push('_');
            k.push_str(value);
        }
    }
    k
}

fn parse_file(name: &str, text: &str) -> Result<YamlRoot, ConfigError> {
    let value: Value = serde_yaml_ng::from_str(text)
        .map_err(|e| err(name, format!("error loading config file: {e}")))?;
    match &value {
        Value::Mapping(m) => validate_keys(name, m)?,
        Value::Null => return Ok(YamlRoot::default()),
        other => {
            return Err(err(
                name,
                format!(
                    "error loading config file: the document is {}, not a map",
                    kind(other)
                ),
            ))
        }
    }
    serde_yaml_ng::from_value(value)
        .map_err(|e| err(name, format!("error loading config file: {e}")))
}

fn load_descriptors(
    node: &mut Node,
    file: &str,
    parent: &str,
    descriptors: &[YamlDescriptor],
) -> Result<(), ConfigError> {
    for d in descriptors {
        if d.key.is_empty() {
            return Err(err(file, "descriptor has empty key"));
        }
        let final_key = if d.value.is_empty() {
            d.key.clone()
        } else {
            format!("{}_{}", d.key, d.value)
        };
        let full_key = format!("{parent}{final_key}");
        if node.children.contains_key(&final_key) {
            return Err(err(
                file,
                format!("duplicate descriptor composite key '{full_key}'"),
            ));
        }
        if d.quota_mode == Some(true) {
            return Err(err(
                file,
                format!("quota_mode is not supported by this service (descriptor '{full_key}')"),
            ));
        }
        let rule = match &d.rate_limit {
            None => None,
            Some(rl) => {
                let unlimited = rl.unlimited.unwrap_or(false);
                let unit = Unit::parse(&rl.unit);
                if unlimited && unit.is_some() {
                    return Err(err(
                        file,
                        "should not specify rate limit unit when unlimited",
                    ));
                }
                if !unlimited && unit.is_none() {
                    return Err(err(file, format!("invalid rate limit unit '{}'", rl.unit)));
                }
                let replaces: Vec<String> = rl
                    .replaces
                    .iter()
                    .flatten()
                    .map(|r| r.name.clone())
                    .collect();
                for r in &replaces {
                    if r.is_empty() {
                        return Err(err(file, "should not have an empty replaces entry"));
                    }
                    if *r == rl.name {
                        return Err(err(
                            file,
                            "replaces should not contain name of same descriptor",
                        ));
                    }
                }
                Some(Arc::new(Rule {
                    full_key: full_key.clone(),
                    requests_per_unit: rl.requests_per_unit.unwrap_or(0),
                    unit,
                    unlimited,
                    shadow_mode: d.shadow_mode.unwrap_or(false),
                    name: rl.name.clone(),
                    replaces,
                    detailed_metric: d.detailed_metric.unwrap_or(false),
                }))
            }
        };
        let share_threshold = d.share_threshold.unwrap_or(false);
        let has_wildcard = final_key.contains('*');
        if share_threshold && !has_wildcard {
            return Err(err(
                file,
                format!(
                    "share_threshold can only be used with wildcard values (containing '*'), but found key '{final_key}'"
                ),
            ));
        }
        if has_wildcard {
            node.wildcards.push((
                final_key.clone(),
                final_key.split('*').map(str::to_string).collect(),
            ));
        }
        let mut child = Node {
            rule,
            value_to_metric: d.value_to_metric.unwrap_or(false),
            share_threshold,
            ..Node::default()
        };
        load_descriptors(
            &mut child,
            file,
            &format!("{full_key}."),
            d.descriptors.as_deref().unwrap_or_default(),
        )?;
        node.children.insert(final_key, child);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(yaml: &str) -> Result<Config, ConfigError> {
        Config::load(&[("config.test".into(), yaml.into())], false)
    }

    fn e(pairs: &[(&str, &str)]) -> Vec<Entry> {
        pairs
            .iter()
            .map(|(k, v)| Entry {
                key: k.to_string(),
                value: v.to_string(),
            })
            .collect()
    }

    fn found(c: &Config, domain: &str, pairs: &[(&str, &str)]) -> Option<(u32, String)> {
        match c.lookup(domain, &e(pairs)) {
            Lookup::Found(m) => Some((m.rule.requests_per_unit, m.stats_key)),
            _ => None,
        }
    }

    const MESSAGING: &str = "
domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
";

    #[test]
    fn nested_descriptors_and_keys_without_value() {
        let c = load(MESSAGING).unwrap();
        assert_eq!(
            found(
                &c,
                "messaging",
                &[("message_type", "marketing"), ("to_number", "2061111111")]
            ),
            Some((5, "messaging.message_type_marketing.to_number".into()))
        );
        assert_eq!(
            found(&c, "messaging", &[("to_number", "2061111111")]),
            Some((100, "messaging.to_number".into()))
        );
        // The placeholder level has no rule of its own; another value matches nothing.
        assert_eq!(
            found(&c, "messaging", &[("message_type", "marketing")]),
            None
        );
        assert_eq!(
            found(
                &c,
                "messaging",
                &[("message_type", "transactional"), ("to_number", "1")]
            ),
            None
        );
        assert!(matches!(
            c.lookup("nope", &e(&[("a", "b")])),
            Lookup::UnknownDomain
        ));
    }

    #[test]
    fn the_most_specific_match_at_the_requests_depth() {
        let c = load(
            "
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
",
        )
        .unwrap();
        assert_eq!(
            found(&c, "edge_proxy_per_ip", &[("remote_address", "50.0.0.1")]),
            Some((10, "edge_proxy_per_ip.remote_address".into()))
        );
        assert_eq!(
            found(&c, "edge_proxy_per_ip", &[("remote_address", "50.0.0.5")]),
            Some((0, "edge_proxy_per_ip.remote_address_50.0.0.5".into()))
        );
        // Deeper than the configuration: no match (the reference's example 4).
        assert_eq!(
            found(
                &c,
                "edge_proxy_per_ip",
                &[("remote_address", "1"), ("x", "y")]
            ),
            None
        );
    }

    #[test]
    fn detailed_metric_and_value_to_metric_name_the_stats() {
        let c = load(
            "
domain: example8
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: key1
    value: value1
    rate_limit: {unit: minute, requests_per_unit: 20}
",
        )
        .unwrap();
        assert_eq!(
            found(&c, "example8", &[("key1", "unspecified_value")]),
            Some((10, "example8.key1_unspecified_value".into()))
        );
        assert_eq!(
            found(&c, "example8", &[("key1", "value1")]),
            Some((20, "example8.key1_value1".into()))
        );
        let c = load(
            "
domain: example10
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: {unit: minute, requests_per_unit: 60}
",
        )
        .unwrap();
        assert_eq!(
            found(
                &c,
                "example10",
                &[
                    ("route", "api"),
                    ("http_method", "GET"),
                    ("subject_id", "123")
                ]
            ),
            Some((60, "example10.route_api.http_method_GET.subject_id".into()))
        );
    }

    #[test]
    fn wildcards_and_shared_thresholds() {
        let c = load(
            "
domain: example11
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: path
    value: /api/*/action
    rate_limit: {unit: minute, requests_per_unit: 20}
",
        )
        .unwrap();
        match c.lookup("example11", &e(&[("files", "files/a.pdf")])) {
            Lookup::Found(m) => {
                assert_eq!(m.shared, vec![Some("files/*".to_string())]);
                assert_eq!(m.stats_key, "example11.files_files/*");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            found(&c, "example11", &[("path", "/api/123/action")]).map(|f| f.0),
            Some(20)
        );
        assert_eq!(found(&c, "example11", &[("path", "/api/123/other")]), None);
        assert!(wildcard_match(&["a".into(), "".into()], "a"));
        assert!(!wildcard_match(&["ab".into(), "ba".into()], "aba"));
    }

    #[test]
    fn invalid_files_are_refused_with_the_references_messages() {
        let cases = [
            ("domain: d\ndescriptors:\n  - value: v\n", "descriptor has empty key"),
            ("descriptors: []\n", "config file cannot have empty domain"),
            ("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n", "invalid rate limit unit 'fortnight'"),
            ("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: second}\n", "should not specify rate limit unit when unlimited"),
            ("domain: d\ndescriptors:\n  - key: k\n    ratelimit: {unit: second}\n", "config error, unknown key 'ratelimit'"),
            ("domain: d\ndescriptors:\n  - key: k\n  - key: k\n", "duplicate descriptor composite key 'd.k'"),
            ("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, name: a, replaces: [{name: a}]}\n", "replaces should not contain name of same descriptor"),
            ("domain: d\ndescriptors:\n  - key: k\n    share_threshold: true\n", "share_threshold can only be used with wildcard values"),
            ("domain: d\ndescriptors: [\n", "error loading config file"),
        ];
        for (yaml, want) in cases {
            let got = load(yaml).unwrap_err().0;
            assert!(got.starts_with("config.test: "), "{got}");
            assert!(got.contains(want), "{yaml:?}: {got}");
        }
        let two = [
            ("a".to_string(), "domain: d\n".to_string()),
            ("b".to_string(), "domain: d\n".to_string()),
        ];
        assert_eq!(
            Config::load(&two, false).unwrap_err().0,
            "b: duplicate domain 'd' in config file"
        );
        assert!(Config::load(&two, true).is_ok());
    }

    #[test]
    fn scalar_values_read_as_written() {
        let c = load("domain: d\ndescriptors:\n  - key: code\n    value: 404\n    rate_limit: {unit: SECOND, requests_per_unit: 3}\n").unwrap();
        assert_eq!(found(&c, "d", &[("code", "404")]).map(|f| f.0), Some(3));
    }

    #[test]
    fn override_keys_name_every_entry() {
        assert_eq!(override_key("d", &e(&[("a", "1"), ("b", "")])), "d.a_1.b");
    }
}
