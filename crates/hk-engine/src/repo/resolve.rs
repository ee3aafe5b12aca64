//! Jinja resolution of host variables, the way Ansible resolves them lazily.
//!
//! Owns: rendering a host's raw variables (as the inventory merged them) with minijinja,
//! each variable on first use, so `k3s_apiserver_endpoint: "{{ kube_vip_address }}"`
//! becomes that host's VIP. A string that is exactly one `{{ expression }}` keeps the
//! expression's type (a list stays a list), as Ansible's native templating does.
//! What cannot be rendered (an undefined variable, a filter Ansible has and we do not, a
//! loop between variables) is reported as [`Resolved::Unrenderable`] with the reason:
//! never guessed, never an empty string.
//! Must not: read files, or see secrets: vaulted values reach it as placeholders.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use minijinja::value::{Enumerator, Object, ObjectRepr};
use minijinja::{Environment, ErrorKind, UndefinedBehavior, Value};

/// A variable after rendering.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolved {
    Value(serde_json::Value),
    Unrenderable { reason: String },
}

impl Resolved {
    pub fn value(&self) -> Option<&serde_json::Value> {
        match self {
            Resolved::Value(v) => Some(v),
            Resolved::Unrenderable { .. } => None,
        }
    }

    /// The value as a plain string (numbers are written out), if it is a scalar.
    pub fn as_text(&self) -> Option<String> {
        match self.value()? {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            serde_json::Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }
}

/// What a host's templates can see besides its own variables.
#[derive(Debug, Clone, Default)]
pub struct HostContext {
    pub inventory_hostname: String,
    /// Ansible's magic `groups`: every group's hosts. Shared, not copied, per host: it is
    /// the size of the whole inventory, so it is made when a template first reads it.
    pub groups: Groups,
    /// Ansible's magic `group_names`: the host's groups, without `all`.
    pub group_names: Vec<String>,
}

/// Renders templates with the filters and tests Ansible playbooks use most.
#[derive(Clone)]
pub struct Resolver {
    env: Arc<Environment<'static>>,
}

impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Resolver")
    }
}

impl Default for Resolver {
    fn default() -> Self {
        Self::new()
    }
}

/// Every group's hosts, as Ansible's magic `groups` gives them.
pub type GroupMap = BTreeMap<String, Vec<String>>;

/// Ansible's magic `groups`, made at most once, on first read: it copies every host name of
/// the inventory (twice: under `all` and under its group), and most commands render no
/// template that reads it. Clones share one map.
#[derive(Clone, Default)]
pub struct Groups(Arc<GroupsCell>);

#[derive(Default)]
struct GroupsCell {
    map: OnceLock<Arc<GroupMap>>,
    make: Option<Box<dyn Fn() -> GroupMap + Send + Sync>>,
}

impl Groups {
    /// `make` is called the first time the map is read, never more.
    pub fn lazy(make: impl Fn() -> GroupMap + Send + Sync + 'static) -> Groups {
        Groups(Arc::new(GroupsCell {
            map: OnceLock::new(),
            make: Some(Box::new(make)),
        }))
    }

    /// The map (made now if this is the first read).
    pub fn get(&self) -> &GroupMap {
        let cell = &*self.0;
        cell.map
            .get_or_init(|| Arc::new(cell.make.as_ref().map(|make| make()).unwrap_or_default()))
    }

    /// Whether the map was made (a template read it, or it was given made).
    pub fn is_made(&self) -> bool {
        self.0.map.get().is_some()
    }
}

impl From<Arc<GroupMap>> for Groups {
    fn from(map: Arc<GroupMap>) -> Groups {
        Groups(Arc::new(GroupsCell {
            map: OnceLock::from(map),
            make: None,
        }))
    }
}

impl From<GroupMap> for Groups {
    fn from(map: GroupMap) -> Groups {
        Groups::from(Arc::new(map))
    }
}

impl fmt::Debug for Groups {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.map.get() {
            Some(map) => f.debug_tuple("Groups").field(&**map).finish(),
            None => f.write_str("Groups(not made yet)"),
        }
    }
}

const MAGIC_GROUPS: &str = "groups";

/// Variables rendered inside one another at most this deep (`jinja.max_chain`): each level
/// is a nested minijinja render on the stack. ansible-core itself fails a little past 85
/// ("Recursive loop detected in template: maximum recursion depth exceeded"); 64 keeps the
/// deepest render well inside a 2 MiB thread stack.
pub const MAX_CHAIN: usize = 64;

// The budget of one evaluation (`jinja.max_fuel`) is the text module's, shared with the
// planner's runbook templates (runbook/ may not import repo/).
pub use crate::text::{is_out_of_fuel, out_of_fuel_reason, MAX_FUEL};

fn is_template(s: &str) -> bool {
    s.contains("{{") || s.contains("{%")
}

/// Ansible's `bool` filter: strings like "yes"/"on"/"1"/"true" are true, anything else false.
fn ansible_bool(v: Value) -> bool {
    if let Some(s) = v.as_str() {
        return matches!(
            s.trim().to_ascii_lowercase().as_str(),
            "yes" | "on" | "1" | "true" | "y"
        );
    }
    if let Ok(i) = i64::try_from(v.clone()) {
        return i == 1;
    }
    v.is_true()
}

fn ternary(v: Value, yes: Value, no: Value) -> Value {
    if v.is_true() {
        yes
    } else {
        no
    }
}

fn regex_replace(
    s: String,
    pattern: String,
    replacement: String,
) -> Result<String, minijinja::Error> {
    let re = regex::Regex::new(&pattern).map_err(|e| {
        minijinja::Error::new(ErrorKind::InvalidOperation, format!("bad regex: {e}"))
    })?;
    // Ansible uses Python's \1 back-references; the regex crate wants ${1}.
    let replacement = regex::Regex::new(r"\\(\d+)")
        .map(|r| r.replace_all(&replacement, "$${$1}").into_owned())
        .unwrap_or(replacement);
    Ok(re.replace_all(&s, replacement.as_str()).into_owned())
}

fn mandatory(v: Value) -> Result<Value, minijinja::Error> {
    if v.is_undefined() {
        Err(minijinja::Error::new(
            ErrorKind::UndefinedError,
            "mandatory variable is undefined",
        ))
    } else {
        Ok(v)
    }
}

/// `ansible.utils.ipwrap`: an IPv6 address in brackets (for a URL), anything else as it is.
fn ipwrap(v: Value) -> Value {
    match v.as_str() {
        Some(s) if s.parse::<std::net::Ipv6Addr>().is_ok() => Value::from(format!("[{s}]")),
        _ => v,
    }
}

impl Resolver {
    pub fn new() -> Self {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.set_fuel(Some(MAX_FUEL));
        env.add_filter("bool", ansible_bool);
        env.add_filter("ternary", ternary);
        env.add_filter("regex_replace", regex_replace);
        env.add_filter("mandatory", mandatory);
        env.add_filter("ansible.utils.ipwrap", ipwrap);
        env.add_filter("ipwrap", ipwrap);
        Resolver { env: Arc::new(env) }
    }

    /// Render every variable of one host.
    pub fn resolve_all(
        &self,
        ctx: &HostContext,
        raw: &BTreeMap<String, serde_json::Value>,
    ) -> BTreeMap<String, Resolved> {
        let scope = HostScope::new(self.env.clone(), ctx, raw);
        raw.keys()
            .map(|name| (name.clone(), scope.resolve(name)))
            .collect()
    }

    /// Render one variable of one host (its dependencies are rendered as needed).
    pub fn resolve_var(
        &self,
        ctx: &HostContext,
        raw: &BTreeMap<String, serde_json::Value>,
        name: &str,
    ) -> Resolved {
        HostScope::new(self.env.clone(), ctx, raw).resolve(name)
    }

    /// Render a template string against one host's variables.
    pub fn render(
        &self,
        ctx: &HostContext,
        raw: &BTreeMap<String, serde_json::Value>,
        template: &str,
    ) -> Resolved {
        let scope = HostScope::new(self.env.clone(), ctx, raw);
        match scope.render_json(&serde_json::Value::String(template.to_string())) {
            Ok(v) => Resolved::Value(v),
            Err(reason) => Resolved::Unrenderable { reason },
        }
    }
}

/// One host's variables as a lazily rendered mapping: minijinja asks for a name, we render
/// that variable (recursively) the first time and remember the answer.
#[derive(Debug)]
struct HostScope {
    env: Arc<Environment<'static>>,
    raw: BTreeMap<String, serde_json::Value>,
    magic: BTreeMap<String, serde_json::Value>,
    /// `groups`, handed to templates only when one asks for it.
    groups: Groups,
    done: Mutex<BTreeMap<String, Resolved>>,
    in_progress: Mutex<HashSet<String>>,
    /// The first failure met while rendering a dependency, so the outer error can name it.
    last_failure: Mutex<Option<String>>,
}

impl HostScope {
    fn new(
        env: Arc<Environment<'static>>,
        ctx: &HostContext,
        raw: &BTreeMap<String, serde_json::Value>,
    ) -> Arc<Self> {
        let mut magic = BTreeMap::new();
        magic.insert(
            "inventory_hostname".to_string(),
            serde_json::Value::String(ctx.inventory_hostname.clone()),
        );
        let short = ctx
            .inventory_hostname
            .split('.')
            .next()
            .unwrap_or_default()
            .to_string();
        magic.insert(
            "inventory_hostname_short".to_string(),
            serde_json::Value::String(short),
        );
        magic.insert(
            "group_names".to_string(),
            serde_json::to_value(&ctx.group_names).unwrap_or_default(),
        );
        Arc::new(HostScope {
            env,
            raw: raw.clone(),
            magic,
            groups: ctx.groups.clone(),
            done: Mutex::new(BTreeMap::new()),
            in_progress: Mutex::new(HashSet::new()),
            last_failure: Mutex::new(None),
        })
    }

    fn resolve(self: &Arc<Self>, name: &str) -> Resolved {
        if let Some(done) = self.done.lock().ok().and_then(|d| d.get(name).cloned()) {
            return done;
        }
        let Some(raw) = self.raw.get(name).or_else(|| self.magic.get(name)) else {
            return Resolved::Unrenderable {
                reason: format!("`{name}` is not defined for this host"),
            };
        };
        let (entered, depth) = self
            .in_progress
            .lock()
            .map(|mut set| (set.insert(name.to_string()), set.len()))
            .unwrap_or((false, 0));
        if !entered {
            return Resolved::Unrenderable {
                reason: format!("`{name}` refers to itself through other variables (a loop)"),
            };
        }
        if depth > MAX_CHAIN {
            if let Ok(mut set) = self.in_progress.lock() {
                set.remove(name);
            }
            // Not remembered in `done`: from a shallower start this variable may render.
            return Resolved::Unrenderable {
                reason: format!(
                    "`{name}` is reached through more than {MAX_CHAIN} variables each templating the next (limit jinja.max_chain); ansible-core fails such chains too"
                ),
            };
        }
        let result = match self.render_json(raw) {
            Ok(v) => Resolved::Value(v),
            Err(reason) => Resolved::Unrenderable {
                reason: format!("`{name}`: {reason}"),
            },
        };
        if let Ok(mut set) = self.in_progress.lock() {
            set.remove(name);
        }
        if let Ok(mut done) = self.done.lock() {
            done.insert(name.to_string(), result.clone());
        }
        result
    }

    fn render_json(self: &Arc<Self>, raw: &serde_json::Value) -> Result<serde_json::Value, String> {
        match raw {
            serde_json::Value::String(s) if is_template(s) => self.render_str(s),
            serde_json::Value::Array(items) => items
                .iter()
                .map(|v| self.render_json(v))
                .collect::<Result<Vec<_>, _>>()
                .map(serde_json::Value::Array),
            serde_json::Value::Object(map) => map
                .iter()
                .map(|(k, v)| Ok((k.clone(), self.render_json(v)?)))
                .collect::<Result<serde_json::Map<_, _>, String>>()
                .map(serde_json::Value::Object),
            other => Ok(other.clone()),
        }
    }

    fn render_str(self: &Arc<Self>, s: &str) -> Result<serde_json::Value, String> {
        crate::text::template_within_bounds(s).map_err(|e| e.to_string())?;
        let ctx = Value::from_dyn_object(self.clone());
        // Each render tracks the first dependency that failed inside it; the caller's own
        // record is put back afterwards.
        let saved = self.last_failure.lock().ok().and_then(|mut lf| lf.take());
        let trimmed = s.trim();
        let single_expr = trimmed
            .strip_prefix("{{")
            .and_then(|t| t.strip_suffix("}}"))
            .filter(|inner| {
                !inner.contains("{{") && !inner.contains("}}") && !inner.contains("{%")
            });
        let outcome = match single_expr {
            Some(expr) => self
                .env
                .compile_expression(expr.trim())
                .and_then(|e| e.eval(ctx))
                .and_then(|v| {
                    if v.is_undefined() {
                        Err(minijinja::Error::new(
                            ErrorKind::UndefinedError,
                            "undefined value",
                        ))
                    } else {
                        Ok(v)
                    }
                })
                .map(|v| serde_json::to_value(&v).unwrap_or(serde_json::Value::Null)),
            None => self.env.render_str(s, ctx).map(serde_json::Value::String),
        };
        let dep = self.last_failure.lock().ok().and_then(|mut lf| {
            let dep = lf.take();
            *lf = saved;
            dep
        });
        outcome.map_err(|e| {
            let detail = e.detail().map(|d| format!(": {d}")).unwrap_or_default();
            match dep {
                // Out of fuel is what stopped it, whatever a lookup missed on the way.
                _ if e.kind() == ErrorKind::OutOfFuel => {
                    format!("cannot render `{}`: {}", quoted(s), out_of_fuel_reason())
                }
                Some(dep) => format!("cannot render `{}` because {dep}", quoted(s)),
                None => format!("cannot render `{}`: {}{detail}", quoted(s), e.kind()),
            }
        })
    }
}

/// A template as an error message quotes it: whole when short, else its start and length
/// (a refused template may be a long one).
fn quoted(s: &str) -> String {
    const SHOWN: usize = 160;
    match s.char_indices().nth(SHOWN) {
        None => s.to_string(),
        Some((cut, _)) => format!("{}... ({} bytes)", &s[..cut], s.len()),
    }
}

impl Object for HostScope {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let name = key.as_str()?;
        if name == MAGIC_GROUPS && !self.raw.contains_key(name) {
            return Some(Value::from_serialize(self.groups.get()));
        }
        if !self.raw.contains_key(name) && !self.magic.contains_key(name) {
            // A global of the engine (`range`, `dict`, ...) is asked here first and found
            // there: not a failure to report.
            if self.env.globals().any(|(g, _)| g == name) {
                return None;
            }
            if let Ok(mut lf) = self.last_failure.lock() {
                lf.get_or_insert_with(|| format!("`{name}` is not defined for this host"));
            }
            return None;
        }
        match self.resolve(name) {
            Resolved::Value(v) => Some(Value::from_serialize(&v)),
            Resolved::Unrenderable { reason } => {
                if let Ok(mut lf) = self.last_failure.lock() {
                    lf.get_or_insert(reason);
                }
                None
            }
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        let keys: Vec<Value> = self
            .raw
            .keys()
            .chain(self.magic.keys())
            .map(|k| Value::from(k.as_str()))
            .chain(std::iter::once(Value::from(MAGIC_GROUPS)))
            .collect();
        Enumerator::Values(keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(v: serde_json::Value) -> BTreeMap<String, serde_json::Value> {
        serde_json::from_value(v).expect("map")
    }

    fn ctx() -> HostContext {
        HostContext {
            inventory_hostname: "node-a".into(),
            groups: BTreeMap::from([(
                "servers".to_string(),
                vec!["node-a".to_string(), "node-b".to_string()],
            )])
            .into(),
            group_names: vec!["servers".into()],
        }
    }

    /// `groups` is made on the first template that reads it, once, and not at all when
    /// none does; what the template sees is the map `make` gives.
    #[test]
    fn groups_are_made_on_first_read_only() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let made = Arc::new(AtomicUsize::new(0));
        let counter = made.clone();
        let groups = Groups::lazy(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            BTreeMap::from([("servers".to_string(), vec!["node-a".to_string()])])
        });
        let ctx = HostContext {
            groups: groups.clone(),
            ..ctx()
        };
        let r = Resolver::new();
        let plain = raw(json!({"port": 6443, "p": "{{ port }}"}));
        assert_eq!(
            r.resolve_all(&ctx, &plain)["p"],
            Resolved::Value(json!(6443))
        );
        assert_eq!(made.load(Ordering::SeqCst), 0);
        assert!(!groups.is_made());
        let reads = raw(json!({"h": "{{ groups['servers'] }}", "n": "{{ groups | length }}"}));
        let got = r.resolve_all(&ctx, &reads);
        assert_eq!(got["h"], Resolved::Value(json!(["node-a"])));
        assert_eq!(got["n"], Resolved::Value(json!(1)));
        assert_eq!(made.load(Ordering::SeqCst), 1);
        assert!(groups.is_made());
    }

    #[test]
    fn derived_variables_render_per_host() {
        let vars = raw(json!({
            "vip": "10.0.0.9",
            "endpoint": "{{ vip }}",
            "url": "https://{{ endpoint }}:{{ port }}",
            "port": 6443,
            "sans": ["{{ endpoint }}", "127.0.0.1"],
        }));
        let r = Resolver::new().resolve_all(&ctx(), &vars);
        assert_eq!(r["endpoint"], Resolved::Value(json!("10.0.0.9")));
        assert_eq!(r["url"], Resolved::Value(json!("https://10.0.0.9:6443")));
        assert_eq!(r["sans"], Resolved::Value(json!(["10.0.0.9", "127.0.0.1"])));
    }

    #[test]
    fn a_single_expression_keeps_its_type() {
        let vars =
            raw(json!({"port": 6443, "p": "{{ port }}", "hosts": "{{ groups['servers'] }}"}));
        let r = Resolver::new().resolve_all(&ctx(), &vars);
        assert_eq!(r["p"], Resolved::Value(json!(6443)));
        assert_eq!(r["hosts"], Resolved::Value(json!(["node-a", "node-b"])));
    }

    #[test]
    fn undefined_is_reported_not_guessed() {
        let vars = raw(json!({"endpoint": "{{ vip }}", "uses": "x-{{ endpoint }}"}));
        let r = Resolver::new().resolve_all(&ctx(), &vars);
        match &r["endpoint"] {
            Resolved::Unrenderable { reason } => {
                assert!(reason.contains("`vip` is not defined"), "{reason}")
            }
            other => panic!("expected unrenderable, got {other:?}"),
        }
        match &r["uses"] {
            Resolved::Unrenderable { reason } => assert!(reason.contains("vip"), "{reason}"),
            other => panic!("expected unrenderable, got {other:?}"),
        }
    }

    #[test]
    fn loops_are_reported() {
        let vars = raw(json!({"a": "{{ b }}", "b": "{{ a }}"}));
        let r = Resolver::new().resolve_var(&ctx(), &vars, "a");
        match r {
            Resolved::Unrenderable { reason } => assert!(reason.contains("loop"), "{reason}"),
            other => panic!("expected unrenderable, got {other:?}"),
        }
    }

    #[test]
    fn a_long_chain_is_refused_by_name_not_by_a_stack_overflow() {
        let mut vars = serde_json::Map::new();
        for i in 0..1500 {
            vars.insert(format!("v{i}"), json!(format!("{{{{ v{} }}}}", i + 1)));
        }
        vars.insert("v1500".into(), json!("end"));
        let vars = raw(serde_json::Value::Object(vars));
        // A thread with the stack a tokio worker gets: the limit must hold there too.
        let r = std::thread::Builder::new()
            .stack_size(2 * 1024 * 1024)
            .spawn(move || Resolver::new().resolve_all(&ctx(), &vars))
            .expect("spawn")
            .join()
            .expect("no overflow");
        match &r["v0"] {
            Resolved::Unrenderable { reason } => {
                assert!(reason.contains("limit jinja.max_chain"), "{reason}")
            }
            other => panic!("expected unrenderable, got {other:?}"),
        }
        assert_eq!(r["v1499"], Resolved::Value(json!("end")));
        // MAX_CHAIN variables in all, the last one plain: just inside the limit.
        let last = MAX_CHAIN - 1;
        let short: BTreeMap<String, serde_json::Value> = (0..last)
            .map(|i| (format!("w{i}"), json!(format!("{{{{ w{} }}}}", i + 1))))
            .chain(std::iter::once((format!("w{last}"), json!("end"))))
            .collect();
        assert_eq!(
            Resolver::new().resolve_var(&ctx(), &short, "w0"),
            Resolved::Value(json!("end"))
        );
    }

    /// Issue 34: a loop of 10^8 iterations in an inventory value hung every command. Each
    /// evaluation has a budget (`jinja.max_fuel`): the loop is a named error at once, in a
    /// value, a chain's dependency and a single expression alike; an ordinary loop renders.
    #[test]
    fn a_long_loop_runs_out_of_its_budget_with_a_named_error() {
        let bomb = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}192.168.2.10";
        let vars = raw(json!({
            "k3s_api_host": bomb,
            "uses_it": "https://{{ k3s_api_host }}:6443",
            "fine": "{% for i in range(1000) %}{% endfor %}ok",
        }));
        let started = std::time::Instant::now();
        let r = Resolver::new().resolve_all(&ctx(), &vars);
        for name in ["k3s_api_host", "uses_it"] {
            match &r[name] {
                Resolved::Unrenderable { reason } => assert!(
                    reason.contains("limit jinja.max_fuel") && reason.contains("k3s_api_host"),
                    "{name}: {reason}"
                ),
                other => panic!("{name}: expected the budget's refusal, got {other:?}"),
            }
        }
        assert_eq!(r["fine"], Resolved::Value(json!("ok")));
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "took {:?}",
            started.elapsed()
        );
    }

    #[test]
    fn unknown_filters_are_reported() {
        let vars = raw(json!({"x": "{{ '10.0.0.1/24' | ipaddr('address') }}"}));
        let r = Resolver::new().resolve_var(&ctx(), &vars, "x");
        match r {
            Resolved::Unrenderable { reason } => assert!(reason.contains("ipaddr"), "{reason}"),
            other => panic!("expected unrenderable, got {other:?}"),
        }
    }

    #[test]
    fn ansible_filters_and_defaults() {
        let vars = raw(json!({
            "flag": "yes",
            "on": "{{ flag | bool }}",
            "d": "{{ missing | default('fallback') }}",
            "t": "{{ (flag | bool) | ternary('a', 'b') }}",
            "r": "{{ 'k3s-prod-1' | regex_replace('^k3s-(\\\\w+)-(\\\\d)$', '\\\\2-\\\\1') }}",
            "me": "{{ inventory_hostname }}",
        }));
        let r = Resolver::new().resolve_all(&ctx(), &vars);
        assert_eq!(r["on"], Resolved::Value(json!(true)));
        assert_eq!(r["d"], Resolved::Value(json!("fallback")));
        assert_eq!(r["t"], Resolved::Value(json!("a")));
        assert_eq!(r["r"], Resolved::Value(json!("1-prod")));
        assert_eq!(r["me"], Resolved::Value(json!("node-a")));
    }
}
