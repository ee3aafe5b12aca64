//! Runbook validation: text in, a typed [`Runbook`] or every problem found with its
//! `file:line:col`, a message and a hint.
//!
//! Owns: the three layers of checks: the YAML itself (malformed text never panics), the
//! serde shape (unknown fields and wrong types, positioned by serde_yaml), and the rules
//! beyond the schema (per-kind fields, duplicate ids, gates, authorised flags, read-only,
//! template syntax and variable names), positioned with [`crate::yaml`] marks.
//! Must not: read files or look at an inventory; the checks that need hosts are the
//! planner's ([`super::plan`]).
//!
//! Why one file over 800 lines: the three layers of checks run in order over one positioned
//! tree and push into one diagnostics list; their rules share the mark and hint helpers.

use std::collections::{HashMap, HashSet};
use std::fmt;

use super::schema::{
    BetweenHosts, Disrupts, GateSpec, Order, Play, RawRunbook, RawStep, Runbook, Scope, Step,
    StepSpec, Target, DISRUPTS_VALUES, ENV_ROLES, KINDS, KIND_FIELDS, KUBE_CONDITIONS,
    REPO_CONDITIONS, VPN_CONDITIONS,
};
use crate::yaml::{self, Mark, Node};

/// The filter a runbook writes to splice a value into a command as shell text, unquoted
/// (`{{ vars.x | shell_raw }}`). `runbooks validate` warns where it is used and the plan
/// names it in the step's title.
pub const SHELL_RAW: &str = "shell_raw";

/// One problem in a runbook file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: String,
    pub line: usize,
    pub col: usize,
    pub message: String,
    pub hint: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.col, self.message
        )?;
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {hint}")?;
        }
        Ok(())
    }
}

/// The template variables under `env.` (see docs/runbooks.md).
pub const ENV_TEMPLATE_KEYS: &[&str] = &[
    "name",
    "servers",
    "vpn_gateways",
    "agents",
    "primary_group",
    "secondary_group",
    "vip",
    "api_port",
    "kube_vip_lease",
    "vpn_unit",
    "vpn_interface",
    "vpn_exit_ip_url",
];

/// Validate one runbook file. `file_name` is only used in the diagnostics.
pub fn validate_text(file_name: &str, text: &str) -> Result<Runbook, Vec<Diagnostic>> {
    let mut v = Validator {
        file: file_name.to_string(),
        diags: Vec::new(),
        var_marks: std::collections::BTreeMap::new(),
    };
    let root = match yaml::parse_one(text) {
        Ok(root) => root,
        Err(e) => {
            v.push(
                e.mark,
                format!("malformed YAML: {}", e.message),
                Some("check the indentation and quoting around this position"),
            );
            return Err(v.diags);
        }
    };
    if root.as_map().is_none() {
        v.push(
            root.mark,
            "a runbook must be a mapping".to_string(),
            Some("start with `id:`, `environments:` and `steps:` (see docs/runbooks.md)"),
        );
        return Err(v.diags);
    }
    // Before serde, which would call these merely unknown: a field meant to skip a gate is
    // refused for what it tries to do.
    v.refuse_opt_outs(&root);
    if !v.diags.is_empty() {
        return Err(v.diags);
    }
    let raw: RawRunbook = match serde_yaml::from_str(text) {
        Ok(raw) => raw,
        Err(e) => {
            let mark = e
                .location()
                .map(|l| Mark {
                    line: l.line(),
                    col: l.column(),
                })
                .unwrap_or(root.mark);
            let (message, hint) = serde_message(&e.to_string());
            v.diags.push(Diagnostic {
                file: v.file.clone(),
                line: mark.line,
                col: mark.col,
                message,
                hint: Some(hint),
            });
            return Err(v.diags);
        }
    };
    let runbook = v.check(&root, raw);
    if v.diags.is_empty() {
        runbook.ok_or_else(Vec::new)
    } else {
        v.diags.sort_by_key(|d| (d.line, d.col));
        Err(v.diags)
    }
}

/// serde_yaml's message without its trailing position (we print our own), split into the
/// problem and a hint.
fn serde_message(text: &str) -> (String, String) {
    let text = match text.rfind(" at line ") {
        Some(i) => &text[..i],
        None => text,
    };
    if let Some(i) = text.find(", expected ") {
        let (msg, rest) = text.split_at(i);
        let expected = rest.trim_start_matches(", ");
        return (
            msg.to_string(),
            format!("{expected} (see docs/runbooks.md)"),
        );
    }
    (
        text.to_string(),
        "see docs/runbooks.md for the runbook format".to_string(),
    )
}

struct Validator {
    file: String,
    diags: Vec<Diagnostic>,
    /// Where each `vars.X` is first used (the field holding the template).
    var_marks: std::collections::BTreeMap<String, (usize, usize)>,
}

fn kind_names() -> String {
    KINDS.iter().map(|k| k.kind).collect::<Vec<_>>().join(", ")
}

/// Whether an extra var's value turns a flag on, the way Ansible's `bool` filter reads it.
fn is_truthy(text: &str) -> bool {
    matches!(
        text.trim().to_ascii_lowercase().as_str(),
        "true" | "yes" | "on" | "y"
    )
}

fn yaml_scalar_text(value: &serde_yaml::Value) -> Option<String> {
    match value {
        serde_yaml::Value::Bool(b) => Some(b.to_string()),
        serde_yaml::Value::Number(n) => Some(n.to_string()),
        serde_yaml::Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// An Ansible variable name: letters, digits and `_`, not starting with a digit.
fn is_var_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The variables a template string uses (`env.vip`, `host`, `vars.x`), or its syntax error.
pub(crate) fn template_vars(text: &str) -> Result<HashSet<String>, String> {
    crate::text::template_within_bounds(text).map_err(|e| e.to_string())?;
    let env = minijinja::Environment::new();
    let tmpl = env.template_from_str(text).map_err(|e| {
        let detail = e
            .detail()
            .map(str::to_string)
            .unwrap_or_else(|| e.to_string());
        format!("template syntax error: {detail}")
    })?;
    // minijinja's own globals (`range`, `dict`, `namespace`, ...) are functions every
    // template has, not variables a step must be given.
    let globals: HashSet<&str> = env.globals().map(|(name, _)| name).collect();
    Ok(tmpl
        .undeclared_variables(true)
        .into_iter()
        .filter(|v| !globals.contains(v.split('.').next().unwrap_or_default()))
        .collect())
}

/// Where a runbook splices repo text into a shell command unquoted (the `shell_raw`
/// filter): warnings with the exact `file:line:col` in the runbook file, for
/// `runbooks validate` to show. Comments are skipped.
pub fn raw_shell_splices(file_name: &str, text: &str) -> Vec<Diagnostic> {
    let filter = SHELL_RAW;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let code = match line.trim_start().starts_with('#') {
            true => "",
            false => line,
        };
        for (at, _) in code.match_indices(filter) {
            out.push(Diagnostic {
                file: file_name.to_string(),
                line: i + 1,
                col: code[..at].chars().count() + 1,
                message: format!(
                    "`{filter}` splices a value into the command as shell, unquoted: what the repo holds there runs as code"
                ),
                hint: Some("keep it only where the value must be shell syntax; a plain `{{ x }}` is one quoted word".into()),
            });
        }
    }
    out
}

/// The template expressions of an ssh command that sit inside single or double quotes or
/// backticks (the shell quoting the formatter adds would then be nested in the runbook's
/// own and no longer hold). A small POSIX lexer over the template text: quotes, `\`
/// escapes, `$( )` and backticks, comments; `{{ }}` and `{% %}` are opaque.
pub(crate) fn quoted_splices(command: &str) -> Vec<String> {
    #[derive(Clone, Copy, PartialEq)]
    enum Ctx {
        Plain,
        Single,
        Double,
        /// `$( )`, with the count of `(` opened inside it.
        Subst(usize),
        Backtick,
    }
    let b = command.as_bytes();
    let mut stack = vec![Ctx::Plain];
    let mut found = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let ctx = *stack.last().unwrap_or(&Ctx::Plain);
        if b[i] == b'{' && matches!(b.get(i + 1), Some(b'{' | b'%' | b'#')) {
            let close = match b[i + 1] {
                b'{' => "}}",
                b'%' => "%}",
                _ => "#}",
            };
            let end = command[i + 2..]
                .find(close)
                .map(|e| i + 2 + e + 2)
                .unwrap_or(b.len());
            let expr = &command[i..end];
            let quoted = matches!(ctx, Ctx::Single | Ctx::Double | Ctx::Backtick)
                || stack.contains(&Ctx::Backtick);
            if b[i + 1] == b'{' && quoted && !expr.contains(SHELL_RAW) {
                found.push(expr.to_string());
            }
            i = end;
            continue;
        }
        let c = b[i];
        match ctx {
            Ctx::Single => {
                if c == b'\'' {
                    stack.pop();
                }
            }
            Ctx::Double => match c {
                b'\\' => i += 1,
                b'"' => {
                    stack.pop();
                }
                b'`' => stack.push(Ctx::Backtick),
                b'$' if b.get(i + 1) == Some(&b'(') => {
                    stack.push(Ctx::Subst(0));
                    i += 1;
                }
                _ => {}
            },
            Ctx::Plain | Ctx::Subst(_) | Ctx::Backtick => match c {
                b'\\' => i += 1,
                b'\'' => stack.push(Ctx::Single),
                b'"' => stack.push(Ctx::Double),
                b'`' if ctx == Ctx::Backtick => {
                    stack.pop();
                }
                b'`' => stack.push(Ctx::Backtick),
                b'$' if b.get(i + 1) == Some(&b'(') => {
                    stack.push(Ctx::Subst(0));
                    i += 1;
                }
                b'(' => {
                    if let Some(Ctx::Subst(n)) = stack.last_mut() {
                        *n += 1;
                    }
                }
                b')' => match stack.last_mut() {
                    Some(Ctx::Subst(0)) => {
                        stack.pop();
                    }
                    Some(Ctx::Subst(n)) => *n -= 1,
                    _ => {}
                },
                b'#' if i == 0 || b[i - 1].is_ascii_whitespace() || b";&|(".contains(&b[i - 1]) => {
                    // A comment runs to the end of the line.
                    while i < b.len() && b[i] != b'\n' {
                        i += 1;
                    }
                    continue;
                }
                _ => {}
            },
        }
        i += 1;
    }
    found
}

/// Fields a runbook could be written with to skip a gate. None is part of the format: the
/// gate policy comes from hk-console.yaml (`protected: true`), and a runbook can add gates,
/// never remove the policy's.
pub const OPT_OUT_FIELDS: &[&str] = &[
    "protected",
    "policy",
    "gate_policy",
    "gates",
    "skip_gates",
    "no_gates",
    "preview",
    "skip_preview",
    "no_preview",
    "approve",
    "skip_approval",
    "no_approval",
    "confirm",
    "skip_confirm",
    "no_confirm",
];

const POLICY_HINT: &str = "the gate policy comes from hk-console.yaml (`protected: true`): \
every mutating step there is previewed and approved whatever the runbook says; remove this \
field (docs/runbooks.md, \"The gate policy\")";

impl Validator {
    /// Refuse, by name, every field meant to opt out of the gate policy, at the runbook's
    /// top level and on its steps.
    fn refuse_opt_outs(&mut self, root: &Node) {
        let mut maps: Vec<&Node> = vec![root];
        if let Some(steps) = root.get("steps").and_then(Node::as_seq) {
            maps.extend(steps.iter());
        }
        for map in maps {
            for (key, _) in map.as_map().unwrap_or_default() {
                let Some(name) = key.as_key() else { continue };
                if OPT_OUT_FIELDS.contains(&name.as_str()) {
                    self.push(
                        key.mark,
                        format!(
                            "`{name}` would opt out of the gate policy: a runbook can add gates, never remove them"
                        ),
                        Some(POLICY_HINT),
                    );
                }
            }
        }
    }

    fn push(&mut self, mark: Mark, message: String, hint: Option<&str>) {
        self.diags.push(Diagnostic {
            file: self.file.clone(),
            line: mark.line,
            col: mark.col,
            message,
            hint: hint.map(str::to_string),
        });
    }

    /// A waiting step's `condition`: a name from `table` (name, takes an argument), with
    /// exactly the argument it takes. `kind` names the step kind in the messages.
    fn check_condition(
        &mut self,
        mark: Mark,
        kind: &str,
        table: &[(&str, bool)],
        condition: &str,
        example: &str,
    ) {
        // A template (`{{ host }}`) is one word, whatever its spaces.
        let mut flat = String::new();
        let mut rest = condition;
        while let Some(i) = rest.find("{{") {
            flat.push_str(&rest[..i]);
            flat.push_str("{{}}");
            rest = rest[i..].find("}}").map_or("", |j| &rest[i + j + 2..]);
        }
        flat.push_str(rest);
        let mut words = flat.split_whitespace();
        let name = words.next().unwrap_or_default();
        let arg = words.next();
        let extra = words.next();
        match table.iter().find(|(n, _)| *n == name) {
            None => self.push(
                mark,
                format!("unknown {kind} condition `{name}`"),
                Some(&format!(
                    "the conditions are: {}",
                    table
                        .iter()
                        .map(|(n, a)| if *a {
                            format!("{n} <what>")
                        } else {
                            n.to_string()
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            ),
            Some((_, true)) if arg.is_none() => self.push(
                mark,
                format!("{kind} condition `{name}` needs what to wait for"),
                Some(example),
            ),
            Some((_, false)) if arg.is_some() => self.push(
                mark,
                format!("{kind} condition `{name}` takes no argument"),
                None,
            ),
            // kube-wait's conditions predate this check and parse their own tail.
            Some(_) if kind != "kube-wait" && extra.is_some() => self.push(
                mark,
                format!("{kind} condition `{name}` takes one argument, not `{condition}`"),
                Some(example),
            ),
            _ => {}
        }
    }

    /// Check a string that may hold a template: syntax, and that every variable exists in
    /// the scope the step runs in.
    fn check_template(&mut self, mark: Mark, text: &str, scope: Scope) {
        let vars = match template_vars(text) {
            Ok(vars) => vars,
            Err(msg) => {
                self.push(
                    mark,
                    msg,
                    Some("templates use minijinja syntax: `{{ env.vip }}`"),
                );
                return;
            }
        };
        let mut vars: Vec<_> = vars.into_iter().collect();
        vars.sort();
        for var in vars {
            let mut parts = var.splitn(2, '.');
            let root = parts.next().unwrap_or_default();
            let rest = parts.next();
            match (root, rest) {
                ("env", Some(key)) if ENV_TEMPLATE_KEYS.contains(&key) => {}
                ("env", _) => self.push(
                    mark,
                    format!("unknown template variable `{var}`"),
                    Some(&format!(
                        "the environment variables are env.{}",
                        ENV_TEMPLATE_KEYS.join(", env.")
                    )),
                ),
                ("vars", Some(name)) if scope == Scope::Host => {
                    let name = name.split('.').next().unwrap_or(name).to_string();
                    self.var_marks.entry(name).or_insert((mark.line, mark.col));
                }
                ("host", None) if scope == Scope::Host => {}
                ("host", None) | ("vars", Some(_)) => self.push(
                    mark,
                    format!("`{var}` is only defined in a per-host step"),
                    Some("give the runbook a target and the step `scope: host`"),
                ),
                _ => self.push(
                    mark,
                    format!("unknown template variable `{var}`"),
                    Some("the template variables are env.*, host and vars.<host var> (docs/runbooks.md)"),
                ),
            }
        }
    }

    fn check(&mut self, root: &Node, raw: RawRunbook) -> Option<Runbook> {
        let at = |key: &str| root.get(key).map(|n| n.mark).unwrap_or(root.mark);
        if !is_ident(&raw.id) {
            self.push(
                at("id"),
                format!("runbook id `{}` is not a valid id", raw.id),
                Some("ids are lower-case letters, digits and `-`, e.g. `etcd-io-priority`"),
            );
        }
        if raw.environments.is_empty() {
            self.push(
                at("environments"),
                "a runbook must name the environments it is meant for".into(),
                Some("e.g. `environments: [prod]`"),
            );
        }
        let target = raw
            .target
            .as_ref()
            .map(|t| self.check_target(root.get("target").unwrap_or(root), t, &raw.environments));
        if raw.steps.is_empty() {
            self.push(
                at("steps"),
                "a runbook needs at least one step".into(),
                None,
            );
        }
        let step_nodes: Vec<Node> = root
            .get("steps")
            .and_then(Node::as_seq)
            .map(<[Node]>::to_vec)
            .unwrap_or_default();
        let mut seen: HashMap<String, Mark> = HashMap::new();
        let mut authorised: HashSet<String> = HashSet::new();
        let mut steps = Vec::new();
        for (i, raw_step) in raw.steps.iter().enumerate() {
            let node = step_nodes.get(i).cloned().unwrap_or_else(|| root.clone());
            let id_mark = node.get("id").map(|n| n.mark).unwrap_or(node.mark);
            if !is_ident(&raw_step.id) {
                self.push(
                    id_mark,
                    format!("step id `{}` is not a valid id", raw_step.id),
                    Some("ids are lower-case letters, digits and `-`"),
                );
            }
            if let Some(first) = seen.get(&raw_step.id) {
                self.push(
                    id_mark,
                    format!(
                        "duplicate step id `{}` (first used at line {})",
                        raw_step.id, first.line
                    ),
                    Some("every step needs its own id: the journal names steps by it"),
                );
            } else {
                seen.insert(raw_step.id.clone(), id_mark);
            }
            if let Some(step) = self.check_step(
                &node,
                raw_step,
                target.is_some(),
                raw.read_only,
                &mut authorised,
            ) {
                steps.push(step);
            }
        }
        let target = target.flatten();
        // `defaults:` as PyYAML types it (the values become `vars.X` like inventory values).
        let mut defaults = std::collections::BTreeMap::new();
        let mut default_marks = std::collections::BTreeMap::new();
        if let Some(node) = root.get("defaults").filter(|n| !n.is_null()) {
            match node.as_map() {
                Some(entries) => {
                    for (k, v) in entries {
                        match k.as_key().filter(|k| is_var_name(k)) {
                            Some(name) => {
                                default_marks.insert(name.clone(), (k.mark.line, k.mark.col));
                                defaults.insert(name, v.to_json());
                            }
                            None => self.push(
                                k.mark,
                                "a `defaults:` key must be a variable name".into(),
                                Some("letters, digits and `_`, not starting with a digit: `etcd_io_priority_nr_requests: 32`"),
                            ),
                        }
                    }
                }
                None => self.push(
                    node.mark,
                    "`defaults:` must be a mapping of variable names to values".into(),
                    None,
                ),
            }
        }
        if !self.diags.is_empty() {
            return None;
        }
        Some(Runbook {
            title: raw.title.clone().unwrap_or_else(|| raw.id.clone()),
            id: raw.id,
            description: raw.description.unwrap_or_default(),
            environments: raw.environments,
            read_only: raw.read_only,
            target,
            steps,
            defaults,
            default_marks,
            var_marks: std::mem::take(&mut self.var_marks),
            source: self.file.clone(),
            // Only the loader of the shipped table says otherwise.
            shipped: false,
        })
    }

    fn check_target(
        &mut self,
        node: &Node,
        t: &super::schema::RawTarget,
        environments: &[String],
    ) -> Option<Target> {
        let before = self.diags.len();
        let at = |key: &str| node.get(key).map(|n| n.mark).unwrap_or(node.mark);
        if t.group.trim().is_empty() {
            self.push(
                at("group"),
                "target group is empty".into(),
                Some(&format!(
                    "name a group or an environment role ({})",
                    ENV_ROLES.join(", ")
                )),
            );
        }
        if let Some(serial) = t.serial {
            if serial != 1 {
                self.push(
                    at("serial"),
                    format!("serial: {serial} is not supported"),
                    Some("hk-console runs one node at a time: use `serial: 1` or leave it out"),
                );
            }
        }
        let order = t.order.as_ref().map(|o| match o {
            super::schema::RawOrder::List(hosts) => Order::List(hosts.clone()),
            super::schema::RawOrder::PerEnv(map) => {
                Order::PerEnv(map.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            }
            // Checked below: an unknown name is an error at its line.
            super::schema::RawOrder::Keyword(_) => Order::ServersFirst,
        });
        if let Some(super::schema::RawOrder::Keyword(word)) = &t.order {
            if !super::schema::ORDER_KEYWORDS.contains(&word.as_str()) {
                self.push(
                    at("order"),
                    format!("order `{word}` is not a named order"),
                    Some(&format!(
                        "a list of hosts, a map environment -> list of hosts, or one of: {}",
                        super::schema::ORDER_KEYWORDS.join(", ")
                    )),
                );
            }
        }
        if let (Some(order), Some(order_node)) = (&order, node.get("order")) {
            if t.single {
                self.push(
                    at("order"),
                    "`order` cannot be combined with `single: true`".into(),
                    Some("a single-host target runs on the one host named at plan time"),
                );
            }
            let lists: Vec<(Option<Mark>, &Node)> = match order_node.as_map() {
                Some(entries) => entries.iter().map(|(k, v)| (Some(k.mark), v)).collect(),
                None => vec![(None, order_node)],
            };
            if let Order::PerEnv(_) = order {
                for (key_mark, _) in &lists {
                    let Some(key_mark) = key_mark else { continue };
                    let key = order_node
                        .as_map()
                        .and_then(|m| m.iter().find(|(k, _)| k.mark == *key_mark))
                        .and_then(|(k, _)| k.as_key())
                        .unwrap_or_default();
                    if !environments.contains(&key) {
                        self.push(
                            *key_mark,
                            format!("order names environment `{key}`, which the runbook is not meant for"),
                            Some(&format!("environments: [{}]", environments.join(", "))),
                        );
                    }
                }
            }
            for (_, list) in lists {
                let mut seen = HashSet::new();
                for item in list.as_seq().unwrap_or_default() {
                    let name = item.as_key().unwrap_or_default();
                    if !seen.insert(name.clone()) {
                        self.push(
                            item.mark,
                            format!("host `{name}` is named twice in order"),
                            Some("an order names every target host exactly once"),
                        );
                    }
                }
            }
        }
        let between_hosts = t.between_hosts.as_ref().map(BetweenHosts::from_raw);
        if let (Some(bh), Some(raw)) = (&between_hosts, &t.between_hosts) {
            let bh_node = node.get("between_hosts").unwrap_or(node);
            let bh_at = |key: &str| bh_node.get(key).map(|n| n.mark).unwrap_or(bh_node.mark);
            if t.single {
                self.push(
                    at("between_hosts"),
                    "`between_hosts` cannot be combined with `single: true`".into(),
                    Some("a single-host target has no next host to gate"),
                );
            }
            if bh.timeout_s <= bh.soak_s {
                let key = if raw.timeout_s.is_some() {
                    "timeout_s"
                } else {
                    "soak_s"
                };
                self.push(
                    bh_at(key),
                    format!(
                        "`between_hosts.timeout_s` ({}) is not longer than the soak ({} s): the gate could never pass",
                        bh.timeout_s, bh.soak_s
                    ),
                    Some("give the gate more time than the soak it must see"),
                );
            }
        }
        if self.diags.len() > before {
            return None;
        }
        Some(Target {
            group: t.group.clone(),
            order,
            require_member_of: t.require_member_of.clone(),
            single: t.single,
            serial: t.serial == Some(1),
            between_hosts,
        })
    }

    fn check_step(
        &mut self,
        node: &Node,
        raw: &RawStep,
        has_target: bool,
        read_only: bool,
        authorised: &mut HashSet<String>,
    ) -> Option<Step> {
        let before = self.diags.len();
        let at = |key: &str| node.get(key).map(|n| n.mark).unwrap_or(node.mark);
        let key_at = |key: &str| node.entry(key).map(|(k, _)| k.mark).unwrap_or(node.mark);
        let Some(rules) = KINDS.iter().find(|k| k.kind == raw.kind) else {
            self.push(
                at("kind"),
                format!("unknown step kind `{}`", raw.kind),
                Some(&format!("the kinds are: {}", kind_names())),
            );
            return None;
        };
        // Fields that exist in the format but not on this kind.
        for (key, _) in node.as_map().unwrap_or_default() {
            let Some(name) = key.as_key() else { continue };
            if !KIND_FIELDS.contains(&name.as_str()) || rules.allowed.contains(&name.as_str()) {
                continue;
            }
            let (message, hint) = match (name.as_str(), raw.kind.as_str()) {
                ("check_first", _) => (
                    format!("check_first is only for ansible steps, not `{}`", raw.kind),
                    "only ansible-playbook has a check mode to run first".to_string(),
                ),
                ("mutates", "ansible") => (
                    "whether an ansible step mutates is derived, not declared".to_string(),
                    "an ansible step mutates unless it has `check: true`; remove `mutates`"
                        .to_string(),
                ),
                _ => (
                    format!("`{name}` is not a field of a step of kind `{}`", raw.kind),
                    format!(
                        "a step of kind `{}` takes: {}",
                        raw.kind,
                        if rules.allowed.is_empty() {
                            "no kind-specific fields".to_string()
                        } else {
                            rules.allowed.join(", ")
                        }
                    ),
                ),
            };
            self.push(key.mark, message, Some(&hint));
        }
        for req in rules.required {
            if node.get(req).is_none() {
                let hint = match *req {
                    "mutates" => "ssh cannot know what a command does: say `mutates: true` or `mutates: false`".to_string(),
                    "timeout_s" => "say how long to wait, in seconds, e.g. `timeout_s: 600`".to_string(),
                    _ => format!(
                        "a step of kind `{}` needs: {} (see docs/runbooks.md)",
                        raw.kind,
                        rules.required.join(", ")
                    ),
                };
                self.push(
                    key_at("kind"),
                    format!("a step of kind `{}` needs `{req}`", raw.kind),
                    Some(&hint),
                );
            }
        }
        if raw.kind == "manual" && raw.title.is_none() {
            self.push(
                key_at("kind"),
                "a step of kind `manual` needs a `title`".into(),
                Some("the title is what the operator is asked to do, e.g. `title: Run tofu -replace on the node`"),
            );
        }
        if self.diags.len() > before {
            return None;
        }

        let scope = match raw.scope.as_deref() {
            None if has_target => Scope::Host,
            None => Scope::Once,
            Some("host") => Scope::Host,
            Some("once") => Scope::Once,
            Some(other) => {
                self.push(
                    at("scope"),
                    format!("unknown scope `{other}`"),
                    Some("scope is `host` (once per target host) or `once`"),
                );
                return None;
            }
        };
        if scope == Scope::Host && !has_target {
            self.push(
                at("scope"),
                "a per-host step needs a runbook `target`".into(),
                Some("add `target: { group: servers }` or make the step `scope: once`"),
            );
        }
        if raw.kind == "ssh" && scope == Scope::Once {
            self.push(
                at("scope"),
                "an ssh step runs on a host, so it cannot be `scope: once`".into(),
                Some("give the runbook a target and leave the step per-host"),
            );
        }
        if raw.only_on.is_some() && scope == Scope::Once {
            self.push(
                key_at("only_on"),
                "`only_on` applies to per-host steps only".into(),
                Some("remove it or make the step per-host"),
            );
        }

        // Every string that may hold a template.
        let mut strings: Vec<(Mark, String)> = Vec::new();
        for key in [
            "title",
            "playbook",
            "limit",
            "command",
            "condition",
            "tcp",
            "on_fail",
            "gate",
            "object",
            "namespace",
        ] {
            if let Some(n) = node.get(key) {
                if let Some(s) = n.as_key() {
                    strings.push((n.mark, s));
                }
            }
        }
        for key in ["tags", "expect_hosts"] {
            for item in node.get(key).and_then(Node::as_seq).unwrap_or_default() {
                if let Some(s) = item.as_key() {
                    strings.push((item.mark, s));
                }
            }
        }
        if let Some(expect) = node.get("expect").and_then(Node::as_map) {
            for (_, v) in expect {
                if let Some(s) = v.as_str() {
                    strings.push((v.mark, s.to_string()));
                }
            }
        }

        let mut extra_vars = Vec::new();
        if let Some(map) = &raw.extra_vars {
            let var_nodes = node
                .get("extra_vars")
                .and_then(Node::as_map)
                .unwrap_or_default();
            for (k, value) in map {
                let key = yaml_scalar_text(k).unwrap_or_default();
                let (key_mark, value_mark) = var_nodes
                    .iter()
                    .find(|(kn, _)| kn.as_key().as_deref() == Some(key.as_str()))
                    .map(|(kn, vn)| (kn.mark, vn.mark))
                    .unwrap_or((at("extra_vars"), at("extra_vars")));
                let Some(text) = yaml_scalar_text(value) else {
                    self.push(
                        value_mark,
                        format!("extra var `{key}` must be a string, number or boolean"),
                        Some("hk-console passes extra vars as `-e key=value`"),
                    );
                    continue;
                };
                if raw.kind == "ansible" && is_truthy(&text) && !authorised.contains(&key) {
                    self.push(
                        key_mark,
                        format!(
                            "extra var `{key}: {text}` is not authorised by a preceding `authorise {key}` gate"
                        ),
                        Some(&format!(
                            "add a step `{{ kind: gate, gate: authorise {key} }}` before this one: a flag like this (a reboot) is never passed silently"
                        )),
                    );
                }
                strings.push((value_mark, text.clone()));
                extra_vars.push((key, text));
            }
        }
        for (mark, text) in &strings {
            self.check_template(*mark, text, scope);
        }
        if raw.kind == "ssh" {
            if let Some(command) = &raw.command {
                for expr in quoted_splices(command) {
                    self.push(
                        at("command"),
                        format!("`{expr}` sits inside shell quotes or backticks in the command: the value is quoted already, and quoting it twice lets a value break out"),
                        Some("write the expression outside any quotes (`[ \"$x\" = {{ vars.y }} ]`): every value lands as exactly one shell word"),
                    );
                }
            }
        }

        // A process step that may never end is refused; 0 would stop it before it began.
        if matches!(raw.kind.as_str(), "ansible" | "list-hosts") && raw.timeout_s == Some(0) {
            self.push(
                at("timeout_s"),
                "`timeout_s: 0` would stop the play before it could answer".into(),
                Some("give the seconds the play may take, e.g. `timeout_s: 1800`; left out, ansible steps get 30 min and list-hosts 5 min"),
            );
        }
        let play = || Play {
            playbook: raw.playbook.clone().unwrap_or_default(),
            extra_vars: extra_vars.clone(),
            tags: raw.tags.clone().unwrap_or_default(),
            limit: raw.limit.clone(),
        };
        let (spec, mutates) = match raw.kind.as_str() {
            "list-hosts" => (
                StepSpec::ListHosts {
                    play: play(),
                    expect_hosts: raw.expect_hosts.clone(),
                    timeout_s: raw.timeout_s,
                },
                false,
            ),
            "ansible" => {
                if raw.check_first == Some(false) {
                    self.push(
                        key_at("check_first"),
                        "`check_first: false` would skip the preview the gate policy requires in a protected environment".into(),
                        Some("remove it: left out, the step runs as written where the environment is not protected and is previewed and approved where it is; `check_first: true` previews it everywhere"),
                    );
                }
                let check_first = raw.check_first.unwrap_or(false);
                let check_only = raw.check.unwrap_or(false);
                if check_first && check_only {
                    self.push(
                        key_at("check_first"),
                        "`check_first` and `check` exclude each other".into(),
                        Some("`check: true` only previews; `check_first: true` previews, then applies"),
                    );
                }
                (
                    StepSpec::Ansible {
                        play: play(),
                        check_first,
                        check_only,
                        timeout_s: raw.timeout_s,
                    },
                    !check_only,
                )
            }
            "ssh" => (
                StepSpec::Ssh {
                    command: raw.command.clone().unwrap_or_default(),
                    expect: raw.expect.clone().unwrap_or_default(),
                    timeout_s: raw.timeout_s,
                },
                raw.mutates.unwrap_or(true),
            ),
            "kube-wait" => {
                let condition = raw.condition.clone().unwrap_or_default();
                self.check_condition(
                    at("condition"),
                    "kube-wait",
                    KUBE_CONDITIONS,
                    &condition,
                    "e.g. `daemonset-rolled-out kube-system/cilium`, `node-ready {{ host }}`",
                );
                (
                    StepSpec::KubeWait {
                        condition,
                        timeout_s: raw.timeout_s.unwrap_or_default(),
                    },
                    false,
                )
            }
            "repo-wait" => {
                let condition = raw.condition.clone().unwrap_or_default();
                self.check_condition(
                    at("condition"),
                    "repo-wait",
                    REPO_CONDITIONS,
                    &condition,
                    "e.g. `vpn-remotes-differ {{ host }}`",
                );
                (
                    StepSpec::RepoWait {
                        condition,
                        timeout_s: raw.timeout_s.unwrap_or_default(),
                    },
                    false,
                )
            }
            "vpn-wait" => {
                let condition = raw.condition.clone().unwrap_or_default();
                self.check_condition(
                    at("condition"),
                    "vpn-wait",
                    VPN_CONDITIONS,
                    &condition,
                    "e.g. `vpn-loop-gone {{ host }}`",
                );
                (
                    StepSpec::VpnWait {
                        condition,
                        timeout_s: raw.timeout_s.unwrap_or_default(),
                    },
                    false,
                )
            }
            "probe" => {
                let tcp = raw.tcp.clone().unwrap_or_default();
                if !tcp.contains(':') {
                    self.push(
                        at("tcp"),
                        format!("probe target `{tcp}` is not host:port"),
                        Some("e.g. `tcp: \"{{ env.vip }}:{{ env.api_port }}\"`"),
                    );
                }
                (
                    StepSpec::Probe {
                        tcp,
                        timeout_s: raw.timeout_s,
                        on_fail: raw.on_fail.clone(),
                    },
                    false,
                )
            }
            "gate" => {
                let text = raw.gate.clone().unwrap_or_default();
                let mut words = text.split_whitespace();
                let name = words.next().unwrap_or_default();
                let param: Vec<&str> = words.collect();
                let gate = match (name, param.as_slice()) {
                    ("operator-present", []) => Some(GateSpec::OperatorPresent),
                    ("operator-present", _) => {
                        self.push(
                            at("gate"),
                            "`operator-present` takes no parameter".into(),
                            None,
                        );
                        None
                    }
                    ("typed-confirm", []) => Some(GateSpec::TypedConfirm(None)),
                    ("typed-confirm", words) => Some(GateSpec::TypedConfirm(Some(words.join(" ")))),
                    ("authorise", [flag]) => {
                        authorised.insert(flag.to_string());
                        Some(GateSpec::Authorise(flag.to_string()))
                    }
                    ("authorise", []) => {
                        self.push(
                            at("gate"),
                            "gate `authorise` without the flag it authorises".into(),
                            Some("write `gate: authorise <extra var>`, e.g. `gate: authorise memattr_survey_reboots_authorised`"),
                        );
                        None
                    }
                    ("authorise", _) => {
                        self.push(
                            at("gate"),
                            "gate `authorise` takes exactly one flag".into(),
                            Some("one gate per flag: each is authorised on its own"),
                        );
                        None
                    }
                    (other, _) => {
                        self.push(
                            at("gate"),
                            format!("unknown gate `{other}`"),
                            Some("the gates are: operator-present, typed-confirm [phrase], authorise <flag>"),
                        );
                        None
                    }
                };
                (
                    StepSpec::Gate(gate.unwrap_or(GateSpec::OperatorPresent)),
                    false,
                )
            }
            "manual" => (StepSpec::Manual, raw.mutates.unwrap_or(true)),
            "flux-reconcile" => {
                let object = raw.object.clone().unwrap_or_default();
                if object.split('/').filter(|p| !p.is_empty()).count() != 2 {
                    self.push(
                        at("object"),
                        format!("flux object `{object}` is not <kind>/<name>"),
                        Some("e.g. `object: helmrelease/cilium` with `namespace: kube-system`"),
                    );
                }
                (
                    StepSpec::FluxReconcile {
                        object,
                        namespace: raw.namespace.clone(),
                    },
                    true,
                )
            }
            _ => return None,
        };
        if read_only && mutates {
            let why = match raw.kind.as_str() {
                "ansible" => "an ansible step without `check: true` mutates",
                "ssh" => "it declares `mutates: true`",
                "manual" => "a manual step mutates unless it declares `mutates: false`",
                _ => "this kind always mutates",
            };
            self.push(
                at("kind"),
                format!(
                    "step `{}` mutates but the runbook is read_only ({why})",
                    raw.id
                ),
                Some("remove the step, make it non-mutating, or drop `read_only: true`"),
            );
        }
        let disrupts = match raw.disrupts.as_deref() {
            None => None,
            Some("node") => {
                if scope == Scope::Once {
                    self.push(
                        at("disrupts"),
                        "`disrupts: node` needs a per-host step: the node is the step's host"
                            .into(),
                        Some("leave the step per-host (the runbook needs a target)"),
                    );
                }
                if !mutates {
                    self.push(
                        at("disrupts"),
                        format!(
                            "step `{}` declares `disrupts: node` but does not mutate",
                            raw.id
                        ),
                        Some("a step that restarts, reboots or reprovisions a node changes it: remove `disrupts` or make the step mutating"),
                    );
                }
                Some(Disrupts::Node)
            }
            Some(other) => {
                self.push(
                    at("disrupts"),
                    format!("unknown `disrupts: {other}`"),
                    Some(&format!(
                        "`disrupts` takes: {} (the step restarts, reboots or reprovisions its host)",
                        DISRUPTS_VALUES.join(", ")
                    )),
                );
                None
            }
        };
        if self.diags.len() > before {
            return None;
        }
        let declared_read_only_line =
            (raw.kind == "ssh" && raw.mutates == Some(false)).then(|| key_at("mutates").line);
        Some(Step {
            id: raw.id.clone(),
            title: raw.title.clone(),
            scope,
            only_on: raw.only_on.clone(),
            mutates,
            disrupts,
            spec,
            declared_read_only_line,
        })
    }
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_puts_the_hint_on_the_next_line() {
        let d = Diagnostic {
            file: "a.yaml".into(),
            line: 3,
            col: 7,
            message: "boom".into(),
            hint: Some("do this".into()),
        };
        assert_eq!(d.to_string(), "a.yaml:3:7: boom\n  hint: do this");
    }

    #[test]
    fn a_template_chain_too_long_for_the_engine_is_refused_by_count() {
        let long = format!("{{{{ {} }}}}", vec!["a"; 5_000].join(" ~ "));
        let err = template_vars(&long).expect_err("refused");
        assert!(err.contains("4999 operators"), "{err}");
        let fine = format!("{{{{ {} }}}}", vec!["a"; 50].join(" ~ "));
        assert!(template_vars(&fine).is_ok());
        // Counted per tag: many ordinary tags are fine.
        let many = "{{ env.vip }}:{{ env.api_port }} ".repeat(2_000);
        assert!(template_vars(&many).is_ok());
    }

    #[test]
    fn template_vars_are_found_nested() {
        let vars = template_vars("{{ env.vip }}:{{ env.api_port }} {{ host }}").expect("parse");
        assert!(vars.contains("env.vip") && vars.contains("env.api_port") && vars.contains("host"));
        assert!(template_vars("{{ env.vip").is_err());
    }

    fn waiting(kind: &str, condition: &str) -> Result<Runbook, Vec<Diagnostic>> {
        validate_text(
            "w.yaml",
            &format!(
                "id: w\nenvironments: [prod]\nread_only: true\ntarget:\n  group: vpn_gateways\n  single: true\n\
                 steps:\n  - id: w\n    kind: {kind}\n    condition: \"{condition}\"\n    timeout_s: 60\n"
            ),
        )
    }

    #[test]
    fn repo_wait_and_vpn_wait_take_their_named_conditions_read_only() {
        let rb = waiting("repo-wait", "vpn-remotes-differ {{ host }}").expect("valid");
        assert_eq!(
            rb.steps[0].spec,
            StepSpec::RepoWait {
                condition: "vpn-remotes-differ {{ host }}".into(),
                timeout_s: 60
            }
        );
        assert!(!rb.steps[0].mutates && !rb.mutates());
        let rb = waiting("vpn-wait", "vpn-loop-gone {{ host }}").expect("valid");
        assert!(
            matches!(&rb.steps[0].spec, StepSpec::VpnWait { condition, timeout_s: 60 } if condition == "vpn-loop-gone {{ host }}")
        );
        let msg = |r: Result<Runbook, Vec<Diagnostic>>| {
            r.expect_err("refused")
                .iter()
                .map(|d| format!("{}:{}: {}", d.line, d.col, d.message))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(
            msg(waiting("repo-wait", "vpn-loop-gone {{ host }}")),
            "10:16: unknown repo-wait condition `vpn-loop-gone`"
        );
        assert_eq!(
            msg(waiting("repo-wait", "vpn-remotes-differ")),
            "10:16: repo-wait condition `vpn-remotes-differ` needs what to wait for"
        );
        assert_eq!(
            msg(waiting("vpn-wait", "vpn-loop-gone a b")),
            "10:16: vpn-wait condition `vpn-loop-gone` takes one argument, not `vpn-loop-gone a b`"
        );
        // A wait without its timeout would wait forever.
        let e = validate_text(
            "w.yaml",
            "id: w\nenvironments: [prod]\ntarget:\n  group: vpn_gateways\nsteps:\n  - id: w\n    kind: repo-wait\n    condition: vpn-remotes-differ x\n",
        )
        .expect_err("refused");
        assert!(e.iter().any(|d| d.message.contains("timeout_s")), "{e:?}");
    }

    #[test]
    fn truthy_matches_ansible_bool() {
        assert!(is_truthy("true") && is_truthy("Yes") && is_truthy("on"));
        assert!(!is_truthy("false") && !is_truthy("k3s_prod") && !is_truthy("1"));
    }
}
