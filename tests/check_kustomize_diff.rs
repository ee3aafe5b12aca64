//! The differential test of the parity check against the REAL kustomize (built by
//! tests/kustomize/build.sh into target/kustomize-bin): a corpus of overlay variants of the
//! bundled sample, each in a dev and a prod form, each built by kustomize and judged with
//! Flux's substitution rules by a small evaluator of this file's own, then compared with
//! `hk-console check --json --env ENV`, through the binary, twice: with the builtin engine
//! (no kustomize or kubectl on PATH) and with the real one (kustomize on PATH).
//!
//! The real engine must equal kustomize's value and verdict on every variant. The builtin one
//! must equal it or say "cannot tell"; never a different value, never clean where kustomize
//! gives a node IP; and each variant states which of the two it expects of the builtin.

use std::path::{Path, PathBuf};
use std::process::Command;

const VAR: &str = "K3S_API_HOST";

fn kustomize_bin() -> PathBuf {
    let dir = std::env::var_os("HK_KUSTOMIZE_BIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/kustomize-bin"));
    let bin = dir.join("kustomize");
    assert!(
        bin.is_file(),
        "the real kustomize is missing at {}: build it with `bash tests/kustomize/build.sh` (needs Go; tests/run-all.sh does it)",
        bin.display()
    );
    bin
}

/// One environment's facts in the bundled sample.
struct EnvSpec {
    name: &'static str,
    vip: &'static str,
    node: &'static str,
}

const ENVS: [EnvSpec; 2] = [
    EnvSpec {
        name: "dev",
        vip: "192.168.1.49",
        node: "192.168.1.50",
    },
    EnvSpec {
        name: "prod",
        vip: "192.168.2.9",
        node: "192.168.2.10",
    },
];

/// What the builtin engine is expected to do with a variant.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Builtin {
    /// The same value and verdict as kustomize.
    Agrees,
    /// "cannot tell" (a feature it does not model).
    CannotTell,
}

struct Variant {
    name: &'static str,
    builtin: Builtin,
    /// Files relative to the repo root; `{ENV}`, `{VIP}` and `{NODE}` are filled in.
    files: Vec<(&'static str, String)>,
}

fn ks(name: &str, body: &str) -> String {
    format!(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {name}\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: ./platform\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n{body}"
    )
}

fn subst(value: &str) -> String {
    format!("  postBuild:\n    substitute:\n      K3S_API_HOST: \"{value}\"\n")
}

fn from(sources: &str) -> String {
    format!("  postBuild:\n    substituteFrom:\n{sources}")
}

fn cm(name: &str, ns: Option<&str>, data: &str) -> String {
    let ns = ns
        .map(|n| format!("  namespace: {n}\n"))
        .unwrap_or_default();
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n{ns}data:\n{data}")
}

const K: &str = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n";
const O: &str = "clusters/{ENV}/kustomization.yaml";
const B: &str = "clusters/{ENV}-base/kustomization.yaml";

fn v(name: &'static str, builtin: Builtin, files: Vec<(&'static str, String)>) -> Variant {
    Variant {
        name,
        builtin,
        files,
    }
}

/// A base holding the VIP (`{ENV}-base`), with extra kustomization text.
fn base(extra: &str) -> Vec<(&'static str, String)> {
    vec![
        (B, format!("{K}resources:\n  - platform.yaml\n{extra}")),
        (
            "clusters/{ENV}-base/platform.yaml",
            ks("platform", &subst("{VIP}")),
        ),
    ]
}

fn with(
    mut a: Vec<(&'static str, String)>,
    b: Vec<(&'static str, String)>,
) -> Vec<(&'static str, String)> {
    a.extend(b);
    a
}

fn corpus() -> Vec<Variant> {
    use Builtin::{Agrees, CannotTell};
    let node_patch =
        "- op: replace\n  path: /spec/postBuild/substitute/K3S_API_HOST\n  value: \"{NODE}\"\n";
    let nodes_cm = cm(
        "node-addresses",
        Some("flux-system"),
        "  founder: \"{NODE}\"\n",
    );
    vec![
        v("sample", Agrees, vec![]),
        v(
            "direct-substitute",
            Agrees,
            vec![
                (O, format!("{K}resources:\n  - platform.yaml\n")),
                ("clusters/{ENV}/platform.yaml", ks("platform", &subst("{VIP}"))),
            ],
        ),
        v(
            "json6902-inline-node-ip",
            Agrees,
            with(
                base(""),
                vec![(
                    O,
                    format!("{K}resources:\n  - ../{{ENV}}-base\npatches:\n  - target: {{kind: Kustomization, name: platform}}\n    patch: |\n      - op: replace\n        path: /spec/postBuild/substitute/K3S_API_HOST\n        value: \"{{NODE}}\"\n"),
                )],
            ),
        ),
        v(
            "patches-json6902-file",
            Agrees,
            with(
                base(""),
                vec![
                    (
                        O,
                        format!("{K}resources:\n  - ../{{ENV}}-base\npatchesJson6902:\n  - target: {{group: kustomize.toolkit.fluxcd.io, version: v1, kind: Kustomization, name: platform}}\n    path: node.yaml\n"),
                    ),
                    ("clusters/{ENV}/node.yaml", node_patch.to_string()),
                ],
            ),
        ),
        v(
            "smp-inline-target",
            Agrees,
            with(
                base(""),
                vec![(
                    O,
                    format!("{K}resources:\n  - ../{{ENV}}-base\npatches:\n  - target: {{kind: Kustomization}}\n    patch: |\n      apiVersion: kustomize.toolkit.fluxcd.io/v1\n      kind: Kustomization\n      metadata:\n        name: any\n      spec:\n        postBuild:\n          substitute:\n            K3S_API_HOST: \"{{NODE}}\"\n"),
                )],
            ),
        ),
        v(
            "smp-file-self-targeted",
            Agrees,
            with(
                base(""),
                vec![
                    (O, format!("{K}resources:\n  - ../{{ENV}}-base\npatches:\n  - path: api.yaml\n")),
                    (
                        "clusters/{ENV}/api.yaml",
                        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: platform\n  namespace: flux-system\nspec:\n  postBuild:\n    substitute:\n      K3S_API_HOST: \"{NODE}\"\n".into(),
                    ),
                ],
            ),
        ),
        v(
            "psm-patch-without-namespace",
            Agrees,
            with(
                base(""),
                vec![(
                    O,
                    format!("{K}resources:\n  - ../{{ENV}}-base\npatchesStrategicMerge:\n  - |-\n    apiVersion: kustomize.toolkit.fluxcd.io/v1\n    kind: Kustomization\n    metadata:\n      name: platform\n    spec:\n      postBuild:\n        substitute:\n          K3S_API_HOST: \"{{NODE}}\"\n"),
                )],
            ),
        ),
        v(
            "patch-naming-the-wrong-apiversion",
            Agrees,
            with(
                base(""),
                vec![(
                    O,
                    format!("{K}resources:\n  - ../{{ENV}}-base\npatches:\n  - patch: |\n      apiVersion: kustomize.toolkit.fluxcd.io/v1beta2\n      kind: Kustomization\n      metadata:\n        name: platform\n        namespace: flux-system\n      spec:\n        postBuild:\n          substitute:\n            K3S_API_HOST: \"{{NODE}}\"\n"),
                )],
            ),
        ),
        v(
            "target-kind-is-a-pattern",
            Agrees,
            with(
                base(""),
                vec![(
                    O,
                    format!("{K}resources:\n  - ../{{ENV}}-base\npatches:\n  - target: {{kind: Kustom.*}}\n    patch: |\n      - op: replace\n        path: /spec/postBuild/substitute/K3S_API_HOST\n        value: \"{{NODE}}\"\n"),
                )],
            ),
        ),
        // The 2026-09-06 incident, shape 1: a replacement copies the founder's address in.
        v(
            "replacements-inline-node-ip",
            Agrees,
            with(
                base(""),
                vec![
                    (
                        O,
                        format!("{K}resources:\n  - ../{{ENV}}-base\n  - nodes.yaml\nreplacements:\n  - source: {{kind: ConfigMap, name: node-addresses, fieldPath: data.founder}}\n    targets:\n      - select: {{kind: Kustomization, name: platform}}\n        fieldPaths: [spec.postBuild.substitute.K3S_API_HOST]\n"),
                    ),
                    ("clusters/{ENV}/nodes.yaml", nodes_cm.clone()),
                ],
            ),
        ),
        v(
            "replacements-path-node-ip",
            Agrees,
            with(
                base(""),
                vec![
                    (O, format!("{K}resources:\n  - ../{{ENV}}-base\n  - nodes.yaml\nreplacements:\n  - path: replace-api-host.yaml\n")),
                    ("clusters/{ENV}/nodes.yaml", nodes_cm.clone()),
                    (
                        "clusters/{ENV}/replace-api-host.yaml",
                        "source:\n  kind: ConfigMap\n  name: node-addresses\n  fieldPath: data.founder\ntargets:\n  - select:\n      group: kustomize.toolkit.fluxcd.io\n      kind: Kustomization\n    fieldPaths:\n      - spec.postBuild.substitute.K3S_API_HOST\n".into(),
                    ),
                ],
            ),
        ),
        v(
            "replacements-reject-keeps-the-vip",
            Agrees,
            with(
                base(""),
                vec![
                    (
                        O,
                        format!("{K}resources:\n  - ../{{ENV}}-base\n  - nodes.yaml\nreplacements:\n  - source: {{kind: ConfigMap, name: node-addresses, fieldPath: data.founder}}\n    targets:\n      - select: {{kind: Kustomization}}\n        reject:\n          - {{name: platform}}\n        fieldPaths: [spec.postBuild.substitute.K3S_API_HOST]\n"),
                    ),
                    ("clusters/{ENV}/nodes.yaml", nodes_cm.clone()),
                ],
            ),
        ),
        v(
            "replacements-missing-field-refused",
            Agrees,
            with(
                base(""),
                vec![
                    (
                        O,
                        format!("{K}resources:\n  - ../{{ENV}}-base\n  - nodes.yaml\nreplacements:\n  - source: {{kind: ConfigMap, name: node-addresses, fieldPath: data.founder}}\n    targets:\n      - select: {{kind: Kustomization}}\n        fieldPaths: [spec.postBuild.substitute.OTHER_HOST]\n"),
                    ),
                    ("clusters/{ENV}/nodes.yaml", nodes_cm.clone()),
                ],
            ),
        ),
        v(
            "replacements-create",
            Agrees,
            vec![
                (
                    O,
                    format!("{K}resources:\n  - platform.yaml\n  - vip.yaml\nreplacements:\n  - source: {{kind: ConfigMap, name: vip, fieldPath: data.address}}\n    targets:\n      - select: {{kind: Kustomization}}\n        fieldPaths: [spec.postBuild.substitute.K3S_API_HOST]\n        options: {{create: true}}\n"),
                ),
                ("clusters/{ENV}/platform.yaml", ks("platform", "")),
                ("clusters/{ENV}/vip.yaml", cm("vip", Some("flux-system"), "  address: \"{VIP}\"\n")),
            ],
        ),
        // The incident, shape 2: a PatchTransformer sets the founder's own address.
        v(
            "transformer-patch-node-ip",
            Agrees,
            with(
                base(""),
                vec![
                    (O, format!("{K}resources:\n  - ../{{ENV}}-base\ntransformers:\n  - api-host.yaml\n")),
                    (
                        "clusters/{ENV}/api-host.yaml",
                        "apiVersion: builtin\nkind: PatchTransformer\nmetadata:\n  name: api-host\ntarget:\n  kind: Kustomization\n  name: platform\npatch: |\n  - op: replace\n    path: /spec/postBuild/substitute/K3S_API_HOST\n    value: \"{NODE}\"\n".into(),
                    ),
                ],
            ),
        ),
        v(
            "transformer-inline-label-selector",
            Agrees,
            with(
                base("commonLabels:\n  tier: platform\n"),
                vec![(
                    O,
                    format!("{K}resources:\n  - ../{{ENV}}-base\ntransformers:\n  - |-\n    apiVersion: builtin\n    kind: PatchTransformer\n    metadata:\n      name: api-host\n    target:\n      labelSelector: tier=platform\n    patch: '[{{\"op\": \"replace\", \"path\": \"/spec/postBuild/substitute/K3S_API_HOST\", \"value\": \"{{NODE}}\"}}]'\n"),
                )],
            ),
        ),
        v(
            "generator-no-hash",
            Agrees,
            vec![
                (
                    O,
                    format!("{K}resources:\n  - platform.yaml\nconfigMapGenerator:\n  - name: cluster-vars\n    namespace: flux-system\n    literals:\n      - K3S_API_HOST={{VIP}}\n    options:\n      disableNameSuffixHash: true\n"),
                ),
                ("clusters/{ENV}/platform.yaml", ks("platform", &from("      - kind: ConfigMap\n        name: cluster-vars\n"))),
            ],
        ),
        v(
            "generator-hash-left-on",
            Agrees,
            vec![
                (
                    O,
                    format!("{K}resources:\n  - platform.yaml\nconfigMapGenerator:\n  - name: cluster-vars\n    namespace: flux-system\n    literals:\n      - K3S_API_HOST={{VIP}}\n"),
                ),
                ("clusters/{ENV}/platform.yaml", ks("platform", &from("      - kind: ConfigMap\n        name: cluster-vars\n"))),
            ],
        ),
        v(
            "generator-hash-left-on-optional",
            Agrees,
            vec![
                (
                    O,
                    format!("{K}resources:\n  - platform.yaml\nconfigMapGenerator:\n  - name: cluster-vars\n    namespace: flux-system\n    literals:\n      - K3S_API_HOST={{VIP}}\n"),
                ),
                (
                    "clusters/{ENV}/platform.yaml",
                    ks("platform", &from("      - kind: ConfigMap\n        name: cluster-vars\n        optional: true\n")),
                ),
            ],
        ),
        v(
            "generator-options-global",
            Agrees,
            vec![
                (
                    O,
                    format!("{K}resources:\n  - platform.yaml\ngeneratorOptions:\n  disableNameSuffixHash: true\nconfigMapGenerator:\n  - name: cluster-vars\n    namespace: flux-system\n    literals:\n      - K3S_API_HOST=\"{{NODE}}\"\n"),
                ),
                ("clusters/{ENV}/platform.yaml", ks("platform", &from("      - kind: ConfigMap\n        name: cluster-vars\n"))),
            ],
        ),
        v(
            "generator-behavior-merge",
            Agrees,
            vec![
                (B, format!("{K}resources:\n  - platform.yaml\nconfigMapGenerator:\n  - name: cluster-vars\n    namespace: flux-system\n    literals:\n      - K3S_API_HOST={{VIP}}\n      - CLUSTER={{ENV}}\n    options:\n      disableNameSuffixHash: true\n")),
                ("clusters/{ENV}-base/platform.yaml", ks("platform", &from("      - kind: ConfigMap\n        name: cluster-vars\n"))),
                (
                    O,
                    format!("{K}resources:\n  - ../{{ENV}}-base\nconfigMapGenerator:\n  - name: cluster-vars\n    namespace: flux-system\n    behavior: merge\n    literals:\n      - K3S_API_HOST={{NODE}}\n"),
                ),
            ],
        ),
        v(
            "generator-behavior-replace",
            Agrees,
            vec![
                (B, format!("{K}resources:\n  - platform.yaml\nconfigMapGenerator:\n  - name: cluster-vars\n    namespace: flux-system\n    literals:\n      - K3S_API_HOST={{NODE}}\n    options:\n      disableNameSuffixHash: true\n")),
                ("clusters/{ENV}-base/platform.yaml", ks("platform", &from("      - kind: ConfigMap\n        name: cluster-vars\n"))),
                (
                    O,
                    format!("{K}resources:\n  - ../{{ENV}}-base\nconfigMapGenerator:\n  - name: cluster-vars\n    namespace: flux-system\n    behavior: replace\n    literals:\n      - K3S_API_HOST={{VIP}}\n"),
                ),
            ],
        ),
        v(
            "generator-envs",
            Agrees,
            vec![
                (
                    O,
                    format!("{K}resources:\n  - platform.yaml\nconfigMapGenerator:\n  - name: cluster-vars\n    namespace: flux-system\n    envs:\n      - cluster.env\n    options:\n      disableNameSuffixHash: true\n"),
                ),
                ("clusters/{ENV}/cluster.env", "# per environment\nCLUSTER={ENV}\nK3S_API_HOST={VIP}\n".into()),
                ("clusters/{ENV}/platform.yaml", ks("platform", &from("      - kind: ConfigMap\n        name: cluster-vars\n"))),
            ],
        ),
        v(
            "generator-files",
            Agrees,
            vec![
                (
                    O,
                    format!("{K}resources:\n  - platform.yaml\nconfigMapGenerator:\n  - name: cluster-vars\n    namespace: flux-system\n    files:\n      - K3S_API_HOST=api-host.txt\n    options:\n      disableNameSuffixHash: true\n"),
                ),
                ("clusters/{ENV}/api-host.txt", "{NODE}\n".into()),
                ("clusters/{ENV}/platform.yaml", ks("platform", &from("      - kind: ConfigMap\n        name: cluster-vars\n"))),
            ],
        ),
        v(
            "common-labels-then-label-selector",
            Agrees,
            with(
                base("commonLabels:\n  tier: platform\n"),
                vec![(
                    O,
                    format!("{K}resources:\n  - ../{{ENV}}-base\npatches:\n  - target: {{labelSelector: tier=platform}}\n    patch: |\n      - op: replace\n        path: /spec/postBuild/substitute/K3S_API_HOST\n        value: \"{{NODE}}\"\n"),
                )],
            ),
        ),
        v(
            "labels-entry-then-set-based-selector",
            Agrees,
            with(
                base("labels:\n  - pairs:\n      tier: platform\n"),
                vec![(
                    O,
                    format!("{K}resources:\n  - ../{{ENV}}-base\npatches:\n  - target:\n      labelSelector: \"tier in (platform,core),!skip\"\n    patch: |\n      - op: replace\n        path: /spec/postBuild/substitute/K3S_API_HOST\n        value: \"{{NODE}}\"\n"),
                )],
            ),
        ),
        v(
            "set-based-selector-notin",
            Agrees,
            with(
                base("commonLabels:\n  tier: platform\n"),
                vec![(
                    O,
                    format!("{K}resources:\n  - ../{{ENV}}-base\npatches:\n  - target:\n      labelSelector: \"tier notin (platform)\"\n    patch: |\n      - op: replace\n        path: /spec/postBuild/substitute/K3S_API_HOST\n        value: \"{{NODE}}\"\n"),
                )],
            ),
        ),
        v(
            "name-prefix-patch-names-the-old-name",
            Agrees,
            with(
                base("namePrefix: env-\n"),
                vec![(
                    O,
                    format!("{K}resources:\n  - ../{{ENV}}-base\npatches:\n  - patch: |\n      apiVersion: kustomize.toolkit.fluxcd.io/v1\n      kind: Kustomization\n      metadata:\n        name: platform\n        namespace: flux-system\n      spec:\n        postBuild:\n          substitute:\n            K3S_API_HOST: \"{{NODE}}\"\n"),
                )],
            ),
        ),
        v(
            "name-suffix-patch-names-the-new-name",
            Agrees,
            with(
                base("nameSuffix: -x\n"),
                vec![(
                    O,
                    format!("{K}resources:\n  - ../{{ENV}}-base\npatches:\n  - patch: |\n      apiVersion: kustomize.toolkit.fluxcd.io/v1\n      kind: Kustomization\n      metadata:\n        name: platform-x\n        namespace: flux-system\n      spec:\n        postBuild:\n          substitute:\n            K3S_API_HOST: \"{{NODE}}\"\n"),
                )],
            ),
        ),
        v(
            "name-prefix-breaks-substitute-from",
            Agrees,
            vec![
                (O, format!("{K}resources:\n  - platform.yaml\n  - vars.yaml\nnamePrefix: env-\n")),
                ("clusters/{ENV}/vars.yaml", cm("cluster-vars", Some("flux-system"), "  K3S_API_HOST: \"{VIP}\"\n")),
                ("clusters/{ENV}/platform.yaml", ks("platform", &from("      - kind: ConfigMap\n        name: cluster-vars\n"))),
            ],
        ),
        v(
            "component-with-generator",
            Agrees,
            with(
                base(""),
                vec![
                    (O, format!("{K}resources:\n  - ../{{ENV}}-base\ncomponents:\n  - ../{{ENV}}-api\n")),
                    (
                        "clusters/{ENV}-api/kustomization.yaml",
                        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nconfigMapGenerator:\n  - name: api-vars\n    namespace: flux-system\n    literals:\n      - K3S_API_HOST={NODE}\n    options:\n      disableNameSuffixHash: true\npatches:\n  - target:\n      kind: Kustomization\n    patch: |\n      - op: remove\n        path: /spec/postBuild/substitute\n      - op: add\n        path: /spec/postBuild/substituteFrom\n        value:\n          - kind: ConfigMap\n            name: api-vars\n".into(),
                    ),
                ],
            ),
        ),
        v(
            "nested-bases",
            Agrees,
            with(
                base(""),
                vec![
                    ("clusters/{ENV}-mid/kustomization.yaml", format!("{K}resources:\n  - ../{{ENV}}-base\npatches:\n  - target: {{kind: Kustomization}}\n    patch: |\n      - op: replace\n        path: /spec/postBuild/substitute/K3S_API_HOST\n        value: \"{{NODE}}\"\n")),
                    (O, format!("{K}resources:\n  - ../{{ENV}}-mid\npatches:\n  - target: {{kind: Kustomization, name: plat.*}}\n    patch: |\n      - op: replace\n        path: /spec/postBuild/substitute/K3S_API_HOST\n        value: \"{{VIP}}\"\n")),
                ],
            ),
        ),
        v(
            "namespace-transform-and-substitute-from",
            Agrees,
            vec![
                (O, format!("{K}namespace: flux-system\nresources:\n  - platform.yaml\n  - vars.yaml\n")),
                ("clusters/{ENV}/vars.yaml", cm("cluster-vars", None, "  K3S_API_HOST: \"{VIP}\"\n")),
                ("clusters/{ENV}/platform.yaml", ks("platform", &from("      - kind: ConfigMap\n        name: cluster-vars\n"))),
            ],
        ),
        v(
            "secret-source-only",
            Agrees,
            vec![
                (O, format!("{K}resources:\n  - platform.yaml\n")),
                ("clusters/{ENV}/platform.yaml", ks("platform", &from("      - kind: Secret\n        name: cluster-secrets\n"))),
            ],
        ),
        v(
            "substitute-wins-over-substitute-from",
            Agrees,
            vec![
                (O, format!("{K}resources:\n  - platform.yaml\n  - vars.yaml\n")),
                ("clusters/{ENV}/vars.yaml", cm("cluster-vars", Some("flux-system"), "  K3S_API_HOST: \"{NODE}\"\n")),
                (
                    "clusters/{ENV}/platform.yaml",
                    ks("platform", "  postBuild:\n    substitute:\n      K3S_API_HOST: \"{VIP}\"\n    substituteFrom:\n      - kind: ConfigMap\n        name: cluster-vars\n"),
                ),
            ],
        ),
        v(
            "later-source-wins",
            Agrees,
            vec![
                (O, format!("{K}resources:\n  - platform.yaml\n  - vars.yaml\n")),
                (
                    "clusters/{ENV}/vars.yaml",
                    format!("{}\n---\n{}", cm("a-vars", Some("flux-system"), "  K3S_API_HOST: \"{VIP}\"\n"), cm("b-vars", Some("flux-system"), "  K3S_API_HOST: \"{NODE}\"\n")),
                ),
                (
                    "clusters/{ENV}/platform.yaml",
                    ks("platform", &from("      - kind: ConfigMap\n        name: a-vars\n      - kind: ConfigMap\n        name: b-vars\n")),
                ),
            ],
        ),
        v(
            "optional-missing-source",
            Agrees,
            vec![
                (O, format!("{K}resources:\n  - platform.yaml\n  - vars.yaml\n")),
                ("clusters/{ENV}/vars.yaml", cm("a-vars", Some("flux-system"), "  K3S_API_HOST: \"{VIP}\"\n")),
                (
                    "clusters/{ENV}/platform.yaml",
                    ks("platform", &from("      - kind: ConfigMap\n        name: a-vars\n      - kind: ConfigMap\n        name: not-there\n        optional: true\n")),
                ),
            ],
        ),
        v(
            "two-kustomizations-disagree",
            Agrees,
            vec![
                (O, format!("{K}resources:\n  - platform.yaml\n  - apps.yaml\n")),
                ("clusters/{ENV}/platform.yaml", ks("platform", &subst("{VIP}"))),
                ("clusters/{ENV}/apps.yaml", ks("apps", &subst("{NODE}"))),
            ],
        ),
        v(
            "flux-object-under-kustomizes-file-name",
            Agrees,
            vec![(O, ks("platform", &subst("{VIP}")))],
        ),
        v(
            "target-kind-pattern-is-anchored",
            Agrees,
            with(
                base(""),
                vec![(
                    O,
                    format!("{K}resources:\n  - ../{{ENV}}-base\npatches:\n  - target: {{kind: Kustom}}\n    patch: |\n      - op: replace\n        path: /spec/postBuild/substitute/K3S_API_HOST\n        value: \"{{NODE}}\"\n"),
                )],
            ),
        ),
        v(
            "strategic-delete-of-the-kustomization",
            Agrees,
            with(
                base(""),
                vec![(
                    O,
                    format!("{K}resources:\n  - ../{{ENV}}-base\npatches:\n  - patch: |\n      apiVersion: kustomize.toolkit.fluxcd.io/v1\n      kind: Kustomization\n      metadata:\n        name: platform\n        namespace: flux-system\n      $patch: delete\n"),
                )],
            ),
        ),
        v(
            "secret-generator-not-modelled",
            CannotTell,
            vec![
                (O, format!("{K}resources:\n  - platform.yaml\nsecretGenerator:\n  - name: s\n    literals: [a=b]\n")),
                ("clusters/{ENV}/platform.yaml", ks("platform", &subst("{VIP}"))),
            ],
        ),
        v(
            "replacement-delimiter-not-modelled",
            CannotTell,
            with(
                base(""),
                vec![
                    (
                        O,
                        format!("{K}resources:\n  - ../{{ENV}}-base\n  - nodes.yaml\nreplacements:\n  - source: {{kind: ConfigMap, name: node-addresses, fieldPath: data.founder}}\n    targets:\n      - select: {{kind: Kustomization}}\n        fieldPaths: [spec.postBuild.substitute.K3S_API_HOST]\n        options: {{delimiter: \".\", index: 0}}\n"),
                    ),
                    ("clusters/{ENV}/nodes.yaml", nodes_cm.clone()),
                ],
            ),
        ),
        v(
            "transformer-plugin-not-modelled",
            CannotTell,
            with(
                base(""),
                vec![
                    (O, format!("{K}resources:\n  - ../{{ENV}}-base\ntransformers:\n  - labels.yaml\n")),
                    (
                        "clusters/{ENV}/labels.yaml",
                        "apiVersion: builtin\nkind: LabelTransformer\nmetadata:\n  name: l\nlabels:\n  a: b\nfieldSpecs:\n  - path: metadata/labels\n    create: true\n".into(),
                    ),
                ],
            ),
        ),
        v(
            "generators-config-map-generator-config",
            Agrees,
            vec![
                (O, format!("{K}resources:\n  - platform.yaml\ngenerators:\n  - vars-generator.yaml\n")),
                (
                    "clusters/{ENV}/vars-generator.yaml",
                    "apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata:\n  name: cluster-vars\n  namespace: flux-system\nliterals:\n  - K3S_API_HOST={NODE}\noptions:\n  disableNameSuffixHash: true\n".into(),
                ),
                ("clusters/{ENV}/platform.yaml", ks("platform", &from("      - kind: ConfigMap\n        name: cluster-vars\n"))),
            ],
        ),
        v(
            "images-not-modelled",
            CannotTell,
            vec![
                (O, format!("{K}resources:\n  - platform.yaml\nimages:\n  - name: cilium\n    newTag: v1.18.0\n")),
                ("clusters/{ENV}/platform.yaml", ks("platform", &subst("{VIP}"))),
            ],
        ),
    ]
}

/// Kustomize's answer for one variant, judged with Flux's rules by this file's own evaluator.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Truth {
    Value(String),
    /// kustomize refused, or the value rests on something not in the repo.
    Unknown,
    /// Unset, or two Flux Kustomizations disagree: a violation with no one value.
    Broken,
}

fn truth(kustomize: &Path, repo: &Path, env: &str) -> (Truth, String) {
    let out = Command::new(kustomize)
        .args(["build", "--load-restrictor", "LoadRestrictionsNone"])
        .arg(repo.join("clusters").join(env))
        .output()
        .expect("run kustomize");
    if !out.status.success() {
        return (
            Truth::Unknown,
            String::from_utf8_lossy(&out.stderr).to_string(),
        );
    }
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let docs: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde_yaml::Value::deserialize(d).expect("kustomize output is YAML"))
        .collect();
    let s = |v: &serde_yaml::Value, path: &[&str]| -> Option<String> {
        let mut cur = v;
        for p in path {
            cur = cur.get(*p)?;
        }
        cur.as_str().map(str::to_string)
    };
    let ns_of = |v: &serde_yaml::Value| {
        s(v, &["metadata", "namespace"]).unwrap_or_else(|| "default".into())
    };
    let mut values: Vec<Option<String>> = Vec::new();
    let mut unknown = false;
    for d in &docs {
        let flux = s(d, &["apiVersion"])
            .is_some_and(|a| a.starts_with("kustomize.toolkit.fluxcd.io/"))
            && s(d, &["kind"]).as_deref() == Some("Kustomization");
        if !flux {
            continue;
        }
        let ns = ns_of(d);
        let mut value: Option<String> = None;
        let mut shadow = false;
        if let Some(serde_yaml::Value::Sequence(srcs)) = d
            .get("spec")
            .and_then(|x| x.get("postBuild"))
            .and_then(|x| x.get("substituteFrom"))
        {
            for src in srcs {
                let kind = s(src, &["kind"]).unwrap_or_default();
                let name = s(src, &["name"]).unwrap_or_default();
                let optional =
                    src.get("optional").and_then(serde_yaml::Value::as_bool) == Some(true);
                let found = docs.iter().find(|o| {
                    s(o, &["kind"]).as_deref() == Some(kind.as_str())
                        && s(o, &["metadata", "name"]).as_deref() == Some(name.as_str())
                        && ns_of(o) == ns
                });
                match (kind.as_str(), found) {
                    ("ConfigMap", Some(cm)) => {
                        if let Some(x) = s(cm, &["data", VAR]) {
                            value = Some(x.replace('\n', ""));
                            shadow = false;
                        }
                    }
                    (_, None) if optional => {}
                    _ => shadow = true,
                }
            }
        }
        if let Some(x) = s(d, &["spec", "postBuild", "substitute", VAR]) {
            value = Some(x.replace('\n', ""));
            shadow = false;
        }
        if shadow {
            unknown = true;
        } else if value.is_some() {
            values.push(value);
        }
    }
    if unknown {
        return (Truth::Unknown, text);
    }
    let mut distinct: Vec<String> = values.into_iter().flatten().collect();
    distinct.dedup();
    match distinct.as_slice() {
        [one] => (Truth::Value(one.clone()), text),
        _ => (Truth::Broken, text),
    }
}

use serde::Deserialize;

use crate::fs_common;
use fs_common::copy_dir;

fn write_repo(dir: &Path, variant: &Variant, env: &EnvSpec) {
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory");
    copy_dir(&sample, dir);
    let fill = |t: &str| {
        t.replace("{ENV}", env.name)
            .replace("{VIP}", env.vip)
            .replace("{NODE}", env.node)
    };
    if !variant.files.is_empty() {
        // The variant's overlay replaces the sample's.
        let overlay = dir.join("clusters").join(env.name);
        std::fs::remove_dir_all(&overlay).expect("clear overlay");
        std::fs::create_dir_all(&overlay).expect("overlay dir");
    }
    for (path, text) in &variant.files {
        let full = dir.join(fill(path));
        std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        std::fs::write(full, fill(text)).expect("write");
    }
}

#[derive(Debug)]
struct Answer {
    engine: String,
    value: Option<String>,
    verdict: String,
    code: i32,
    json: String,
}

fn check(repo: &Path, env: &str, path: &Path, state: &Path) -> Answer {
    let out = Command::new(env!("CARGO_BIN_EXE_hk-console"))
        .args(["check", "--json", "--env", env, "--repo"])
        .arg(repo)
        .env("PATH", path)
        .env("XDG_STATE_HOME", state)
        .env("XDG_CONFIG_HOME", state)
        .env("HOME", state)
        .output()
        .expect("run hk-console");
    let json = String::from_utf8_lossy(&out.stdout).to_string();
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap_or_else(|e| {
        panic!(
            "check --json is not JSON ({e}): {json}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let e = doc["environments"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["name"] == env))
        .unwrap_or_else(|| panic!("no environment {env} in {json}"))
        .clone();
    Answer {
        engine: e["engine"].as_str().unwrap_or_default().to_string(),
        value: e["value"].as_str().map(str::to_string),
        verdict: e["verdict"].as_str().unwrap_or_default().to_string(),
        code: out.status.code().unwrap_or(-1),
        json,
    }
}

fn expected(truth: &Truth, env: &EnvSpec) -> (Option<String>, &'static str) {
    match truth {
        Truth::Value(v) if v == env.vip => (Some(v.clone()), "clean"),
        Truth::Value(v) => (Some(v.clone()), "violation"),
        Truth::Unknown => (None, "cannot-tell"),
        Truth::Broken => (None, "violation"),
    }
}

#[test]
fn builtin_and_real_engines_agree_with_kustomize_on_every_variant() {
    let kustomize = kustomize_bin();
    let scratch = tempfile::tempdir().expect("tempdir");
    let empty_path = scratch.path().join("empty-path");
    let real_path = scratch.path().join("real-path");
    std::fs::create_dir_all(&empty_path).expect("mkdir");
    std::fs::create_dir_all(&real_path).expect("mkdir");
    std::os::unix::fs::symlink(&kustomize, real_path.join("kustomize")).expect("symlink");
    let state = scratch.path().join("state");

    let corpus = corpus();
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    let (mut builtin_agrees, mut real_agrees, mut total) = (0, 0, 0);
    for variant in &corpus {
        for env in &ENVS {
            total += 1;
            let repo = scratch
                .path()
                .join(format!("{}-{}", variant.name, env.name));
            write_repo(&repo, variant, env);
            let (truth, raw) = truth(&kustomize, &repo, env.name);
            let (want_value, want_verdict) = expected(&truth, env);
            let builtin = check(&repo, env.name, &empty_path, &state);
            let real = check(&repo, env.name, &real_path, &state);
            let label = format!("{}/{}", variant.name, env.name);

            // The real engine: exactly kustomize's answer.
            if real.engine != "kustomize"
                || real.value != want_value
                || real.verdict != want_verdict
            {
                failures.push(format!(
                    "{label}: real engine said {:?} {} ({}), kustomize+Flux say {want_value:?} {want_verdict}\n  kustomize: {}\n  check: {}",
                    real.value, real.verdict, real.engine, raw.trim(), real.json
                ));
            } else {
                real_agrees += 1;
            }
            // The builtin engine: the same answer, or cannot tell; never another value.
            let same = builtin.value == want_value && builtin.verdict == want_verdict;
            let said_cannot_tell = builtin.verdict == "cannot-tell" && builtin.value.is_none();
            if builtin.engine != "builtin" {
                failures.push(format!(
                    "{label}: expected the builtin engine, got {}",
                    builtin.engine
                ));
            }
            if builtin.verdict == "clean" && want_verdict != "clean" {
                failures.push(format!("{label}: builtin says clean where kustomize+Flux give {want_value:?} ({want_verdict})"));
            }
            match variant.builtin {
                Builtin::Agrees if !same => failures.push(format!(
                    "{label}: builtin said {:?} {}, kustomize+Flux say {want_value:?} {want_verdict}\n  kustomize: {}\n  check: {}",
                    builtin.value, builtin.verdict, raw.trim(), builtin.json
                )),
                Builtin::CannotTell if !said_cannot_tell || builtin.code != 2 => failures.push(format!(
                    "{label}: builtin should say cannot tell (exit 2), said {:?} {} (exit {})\n  check: {}",
                    builtin.value, builtin.verdict, builtin.code, builtin.json
                )),
                _ => {}
            }
            if same {
                builtin_agrees += 1;
            }
            // Exit codes follow the verdicts.
            let code_for = |verdict: &str| match verdict {
                "clean" => 0,
                "violation" => 1,
                _ => 2,
            };
            for (who, a) in [("builtin", &builtin), ("real", &real)] {
                if a.code != code_for(&a.verdict) {
                    failures.push(format!(
                        "{label}: {who} exit {} for verdict {}",
                        a.code, a.verdict
                    ));
                }
            }
            rows.push(format!(
                "{label:55} kustomize {:>24} {:11} | builtin {:>14} {:11} | real {:>14} {}",
                format!("{want_value:?}"),
                want_verdict,
                format!("{:?}", builtin.value),
                builtin.verdict,
                format!("{:?}", real.value),
                real.verdict
            ));
        }
    }
    eprintln!("{}", rows.join("\n"));
    eprintln!(
        "{total} variants: builtin equals kustomize on {builtin_agrees}, says cannot tell on {}; real engine equals kustomize on {real_agrees}",
        total - builtin_agrees
    );
    assert!(
        total >= 30,
        "the corpus must hold at least 30 variants, has {total}"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn sample_copy(dir: &Path, config_extra: &str) {
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory"),
        dir,
    );
    if !config_extra.is_empty() {
        let cfg = dir.join("hk-console.yaml");
        let text = std::fs::read_to_string(&cfg).expect("config");
        std::fs::write(&cfg, format!("{config_extra}\n{text}")).expect("write config");
    }
}

#[test]
fn kustomize_bin_in_the_config_is_the_engine_and_a_missing_one_is_cannot_tell() {
    let kustomize = kustomize_bin();
    let scratch = tempfile::tempdir().expect("tempdir");
    let empty = scratch.path().join("empty-path");
    std::fs::create_dir_all(&empty).expect("mkdir");
    let state = scratch.path().join("state");

    let named = scratch.path().join("named");
    sample_copy(&named, &format!("kustomize_bin: {}", kustomize.display()));
    let a = check(&named, "prod", &empty, &state);
    assert_eq!(
        (
            a.engine.as_str(),
            a.value.as_deref(),
            a.verdict.as_str(),
            a.code
        ),
        ("kustomize", Some("192.168.2.9"), "clean", 0),
        "{}",
        a.json
    );

    let missing = scratch.path().join("missing");
    sample_copy(&missing, "kustomize_bin: no-such-kustomize");
    let b = check(&missing, "prod", &empty, &state);
    assert_eq!(
        (b.value.as_deref(), b.verdict.as_str(), b.code),
        (None, "cannot-tell", 2),
        "{}",
        b.json
    );
    assert!(b.json.contains("no-such-kustomize"), "{}", b.json);
}

#[test]
fn without_a_binary_the_text_report_says_the_builtin_engine_ran() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let empty = scratch.path().join("empty-path");
    std::fs::create_dir_all(&empty).expect("mkdir");
    let repo = scratch.path().join("repo");
    sample_copy(&repo, "");
    let out = Command::new(env!("CARGO_BIN_EXE_hk-console"))
        .args(["check", "--repo"])
        .arg(&repo)
        .env("PATH", &empty)
        .env("XDG_STATE_HOME", scratch.path())
        .env("HOME", scratch.path())
        .output()
        .expect("run hk-console");
    let text = String::from_utf8_lossy(&out.stdout);
    let engine_lines: Vec<&str> = text.lines().filter(|l| l.starts_with("engine: ")).collect();
    assert_eq!(engine_lines.len(), 1, "{text}");
    assert!(
        engine_lines[0].starts_with("engine: builtin (no kustomize or kubectl on PATH"),
        "{text}"
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
}
