//! The effective K3S_API_HOST of a Flux overlay, for every way kustomize lets an overlay set
//! it, with the file:line where the winning value was written.

use std::path::{Path, PathBuf};

use hk_engine::repo::config::DEFAULT_FLUX_API_HOST_VAR;
use hk_engine::repo::flux::{effective_substitution, FluxError, OverlayValue, SetBy};

/// The overlay's value of the seed's API host variable (hk-console.yaml's default).
fn overlay_api_host(root: &Path, overlay: &Path) -> Result<OverlayValue, FluxError> {
    effective_substitution(root, overlay, DEFAULT_FLUX_API_HOST_VAR)
}

fn fixture(case: &str) -> PathBuf {
    hk_test_support::root()
        .join("tests/fixtures/check/flux")
        .join(case)
}

fn resolve(case: &str) -> Result<OverlayValue, FluxError> {
    overlay_api_host(&fixture(case), Path::new("clusters/prod"))
}

fn ok(case: &str) -> OverlayValue {
    match resolve(case) {
        Ok(v) => v,
        Err(e) => panic!("{case}: expected a value, got error: {e}"),
    }
}

fn assert_at(v: &OverlayValue, file: &str, line: usize, col: usize) {
    assert_eq!(
        (v.at.file.as_path(), v.at.line, v.at.col),
        (Path::new(file), line, col),
        "where {} was set",
        v.value
    );
}

#[test]
fn flux_substitute_written_directly_in_a_multi_document_resource() {
    let v = ok("direct");
    assert_eq!(v.value, "192.168.2.9");
    assert_eq!(v.set_by, SetBy::Substitute);
    assert_eq!(v.kustomization, "flux-system/platform");
    assert_at(&v, "clusters/prod/platform.yaml", 20, 21);
    assert_eq!(v.kustomization_at.line, 10);
    assert_eq!(v.kustomization_path.as_deref(), Some("./platform"));
}

#[test]
fn inline_strategic_merge_patch_with_a_target_overrides_the_base() {
    let v = ok("smp_inline");
    assert_eq!(v.value, "192.168.2.9");
    // The position is inside the `patch: |` block scalar, translated to the file's lines.
    assert_at(&v, "clusters/prod/kustomization.yaml", 17, 27);
}

#[test]
fn strategic_merge_patch_in_a_file_targets_its_own_kind_and_name() {
    let v = ok("patch_file");
    assert_eq!(v.value, "192.168.2.9");
    assert_at(&v, "clusters/prod/api-host-patch.yaml", 9, 21);
}

#[test]
fn json6902_replace_inline() {
    let v = ok("json6902_replace");
    assert_eq!(v.value, "192.168.2.9");
    assert_at(&v, "clusters/prod/kustomization.yaml", 13, 16);
}

#[test]
fn json6902_remove_lets_the_substitute_from_config_map_decide() {
    let v = ok("json6902_remove");
    assert_eq!(v.value, "192.168.2.9");
    assert_eq!(
        v.set_by,
        SetBy::SubstituteFrom {
            config_map: "cluster-vars".into()
        }
    );
    assert_at(&v, "clusters/prod/cluster-vars.yaml", 7, 17);
}

#[test]
fn patches_strategic_merge_apply_in_file_order() {
    // first.yaml sets .99, the inline entry after it sets .9: the later one wins.
    let v = ok("psm");
    assert_eq!(v.value, "192.168.2.9");
    assert_at(&v, "clusters/prod/kustomization.yaml", 15, 25);
}

#[test]
fn substitute_wins_over_substitute_from() {
    let v = ok("substitute_from");
    assert_eq!(v.value, "192.168.2.9", "vars.yaml's stale .10 must lose");
    assert_eq!(v.set_by, SetBy::Substitute);
    assert_at(&v, "clusters/prod/platform.yaml", 10, 21);
    assert_eq!(v.unread_sources, vec!["Secret cluster-secrets".to_string()]);
}

#[test]
fn component_with_generator_and_namespace() {
    let v = ok("component");
    assert_eq!(v.value, "192.168.2.9");
    assert_eq!(
        v.set_by,
        SetBy::SubstituteFrom {
            config_map: "api-vars".into()
        }
    );
    assert_eq!(v.at.file, Path::new("components/api/kustomization.yaml"));
    assert_eq!(v.at.line, 6);
}

#[test]
fn overlay_without_kustomization_file_is_read_as_flux_does() {
    let v = ok("generated");
    assert_eq!(v.value, "192.168.2.9");
    assert_at(&v, "clusters/prod/sub/platform.yaml", 9, 21);
}

#[test]
fn two_kustomizations_with_different_values_are_a_conflict() {
    let err = resolve("conflict").expect_err("must conflict");
    let msg = err.to_string();
    match err {
        FluxError::Conflict(c) => {
            assert_eq!(c.first_value, "192.168.2.9");
            assert_eq!(c.second_value, "192.168.2.10");
            assert_eq!(c.first_at.line, 9);
            assert_eq!(c.second_at.line, 19);
        }
        other => panic!("expected a conflict, got {other}"),
    }
    assert!(msg.contains("clusters/prod/ks.yaml:19:"), "{msg}");
}

#[test]
fn missing_overlay_is_named() {
    let err =
        overlay_api_host(&fixture("direct"), Path::new("clusters/staging")).expect_err("missing");
    assert!(matches!(err, FluxError::MissingOverlay { .. }), "{err}");
    assert!(err.to_string().contains("clusters/staging"), "{err}");
}

#[test]
fn malformed_yaml_names_file_and_line() {
    let err = resolve("malformed").expect_err("malformed");
    let msg = err.to_string();
    match &err {
        FluxError::Yaml { at, .. } => {
            assert_eq!(at.file, Path::new("clusters/prod/kustomization.yaml"));
            assert!(at.line >= 4, "{msg}");
        }
        other => panic!("expected a YAML error, got {other}"),
    }
}

#[test]
fn removed_everywhere_is_not_set() {
    let err = resolve("not_set").expect_err("not set");
    assert!(matches!(err, FluxError::NotSet { .. }), "{err}");
    assert!(err.to_string().contains("K3S_API_HOST"), "{err}");
}

#[test]
fn missing_resource_names_the_entry() {
    let err = resolve("missing_resource").expect_err("missing resource");
    match &err {
        FluxError::MissingResource { at, resource, .. } => {
            assert_eq!(resource, "../../platform/nowhere.yaml");
            assert_eq!(
                (at.file.as_path(), at.line),
                (Path::new("clusters/prod/kustomization.yaml"), 5)
            );
        }
        other => panic!("expected a missing resource, got {other}"),
    }
}

#[test]
fn a_value_only_a_secret_could_hold_is_not_guessed() {
    let err = resolve("secret_only").expect_err("undeterminable");
    assert!(matches!(err, FluxError::Undeterminable { .. }), "{err}");
    assert!(err.to_string().contains("Secret cluster-secrets"), "{err}");
}

#[test]
fn a_flux_object_saved_as_kustomization_yaml_is_refused_as_kustomize_refuses_it() {
    let r = repo(&[("clusters/prod/kustomization.yaml", BASE_KS)]);
    let err = overlay_api_host(r.path(), Path::new("clusters/prod")).expect_err("refused");
    assert!(err.is_cannot_tell(), "{err}");
    match &err {
        FluxError::Unexpected { at, expected } => {
            assert_eq!(
                (at.file.as_path(), at.line),
                (Path::new("clusters/prod/kustomization.yaml"), 1)
            );
            assert!(
                expected.contains("kustomize.toolkit.fluxcd.io/v1"),
                "{expected}"
            );
        }
        other => panic!("expected a refusal, got {other}"),
    }
}

#[test]
fn a_field_the_builtin_engine_does_not_model_is_cannot_tell_with_its_place() {
    let r = repo(&[
        (
            "clusters/prod/kustomization.yaml",
            "resources:\n  - ks.yaml\nimages:\n  - name: cilium\n    newTag: v1\n",
        ),
        ("clusters/prod/ks.yaml", BASE_KS),
    ]);
    let err = overlay_api_host(r.path(), Path::new("clusters/prod")).expect_err("cannot tell");
    match &err {
        FluxError::CannotTell { at, what, .. } => {
            assert_eq!(
                (at.file.as_path(), at.line),
                (Path::new("clusters/prod/kustomization.yaml"), 4)
            );
            assert!(what.contains("images"), "{what}");
        }
        other => panic!("expected cannot tell, got {other}"),
    }
    assert!(
        err.to_string()
            .contains("clusters/prod/kustomization.yaml:4:"),
        "{err}"
    );
}

#[test]
fn a_generated_config_map_keeps_its_hash_suffix_so_flux_does_not_find_it() {
    let r = repo(&[
        (
            "clusters/prod/kustomization.yaml",
            "resources:\n  - ks.yaml\nconfigMapGenerator:\n  - name: vars\n    literals: [K3S_API_HOST=192.168.2.9]\n",
        ),
        (
            "clusters/prod/ks.yaml",
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: platform\nspec:\n  postBuild:\n    substituteFrom:\n      - kind: ConfigMap\n        name: vars\n",
        ),
    ]);
    let err = overlay_api_host(r.path(), Path::new("clusters/prod")).expect_err("not found");
    assert!(matches!(err, FluxError::Undeterminable { .. }), "{err}");
}

fn sample() -> PathBuf {
    hk_test_support::root().join("inventory")
}

#[test]
fn bundled_sample_overlays_resolve_to_each_environments_vip() {
    let prod = overlay_api_host(&sample(), Path::new("clusters/prod")).expect("prod overlay");
    assert_eq!(prod.value, "192.168.2.9");
    // The JSON6902 replace in the overlay, not the base's placeholder.
    assert_eq!(
        (prod.at.file.as_path(), prod.at.line),
        (Path::new("clusters/prod/kustomization.yaml"), 14)
    );
    let dev = overlay_api_host(&sample(), Path::new("clusters/dev")).expect("dev overlay");
    assert_eq!(dev.value, "192.168.1.49");
    // The Flux Kustomization in its own file, listed by the kustomization (as Flux
    // bootstraps it; kustomize refuses a Flux object saved as kustomization.yaml).
    assert_eq!(
        (dev.at.file.as_path(), dev.at.line),
        (Path::new("clusters/dev/platform.yaml"), 18)
    );
}

/// A throwaway repo from (path, text) pairs, for the error shapes.
fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, text) in files {
        let full = dir.path().join(path);
        std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        std::fs::write(full, text).expect("write");
    }
    dir
}

const BASE_KS: &str = "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: platform\nspec:\n  postBuild:\n    substitute:\n      K3S_API_HOST: 192.168.2.9\n";

#[test]
fn a_kustomization_cycle_is_refused_with_its_entry() {
    let r = repo(&[
        (
            "clusters/prod/kustomization.yaml",
            "resources:\n  - ../base\n",
        ),
        (
            "clusters/base/kustomization.yaml",
            "resources:\n  - ks.yaml\n  - ../prod\n",
        ),
        ("clusters/base/ks.yaml", BASE_KS),
    ]);
    let err = overlay_api_host(r.path(), Path::new("clusters/prod")).expect_err("cycle");
    match &err {
        FluxError::Cycle { at, .. } => {
            assert_eq!(
                (at.file.as_path(), at.line),
                (Path::new("clusters/base/kustomization.yaml"), 3)
            )
        }
        other => panic!("expected a cycle, got {other}"),
    }
}

#[test]
fn replace_of_a_missing_key_fails_at_the_operation() {
    let r = repo(&[
        (
            "clusters/prod/kustomization.yaml",
            "resources:\n  - ks.yaml\npatches:\n  - target: {kind: Kustomization}\n    patch: |\n      - op: replace\n        path: /spec/postBuild/substitute/K3S_API_HOSTS\n        value: x\n",
        ),
        ("clusters/prod/ks.yaml", BASE_KS),
    ]);
    let err = overlay_api_host(r.path(), Path::new("clusters/prod")).expect_err("bad op");
    match &err {
        FluxError::Patch { at, message } => {
            assert_eq!(at.line, 6, "{err}");
            assert!(message.contains("K3S_API_HOSTS"), "{message}");
        }
        other => panic!("expected a patch error, got {other}"),
    }
}

#[test]
fn strategic_delete_removes_the_kustomization() {
    let r = repo(&[
        (
            "clusters/prod/kustomization.yaml",
            "resources:\n  - ks.yaml\npatchesStrategicMerge:\n  - |-\n    apiVersion: kustomize.toolkit.fluxcd.io/v1\n    kind: Kustomization\n    metadata:\n      name: platform\n    $patch: delete\n",
        ),
        ("clusters/prod/ks.yaml", BASE_KS),
    ]);
    let err = overlay_api_host(r.path(), Path::new("clusters/prod")).expect_err("deleted");
    assert!(matches!(err, FluxError::NotSet { .. }), "{err}");
    assert!(
        err.to_string().contains("no Flux Kustomization at all"),
        "{err}"
    );
}

#[test]
fn a_non_string_value_is_rejected_where_written() {
    let r = repo(&[
        ("clusters/prod/kustomization.yaml", "resources:\n  - ks.yaml\n"),
        (
            "clusters/prod/ks.yaml",
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: p\nspec:\n  postBuild:\n    substitute:\n      K3S_API_HOST: 6443\n",
        ),
    ]);
    let err = overlay_api_host(r.path(), Path::new("clusters/prod")).expect_err("int");
    match &err {
        FluxError::Unexpected { at, expected } => {
            assert_eq!(at.line, 8);
            assert!(expected.contains("a string"), "{expected}");
        }
        other => panic!("expected a type error, got {other}"),
    }
}

#[test]
fn json6902_add_of_the_whole_substitute_map() {
    let r = repo(&[
        (
            "clusters/prod/kustomization.yaml",
            "resources:\n  - ks.yaml\npatchesJson6902:\n  - target: {group: kustomize.toolkit.fluxcd.io, version: v1, kind: Kustomization, name: plat.*}\n    patch: |\n      - op: add\n        path: /spec/postBuild/substitute\n        value:\n          K3S_API_HOST: 10.0.0.1\n",
        ),
        ("clusters/prod/ks.yaml", BASE_KS),
    ]);
    let v = overlay_api_host(r.path(), Path::new("clusters/prod")).expect("value");
    assert_eq!(v.value, "10.0.0.1");
    assert_eq!((v.at.line, v.at.col), (9, 25));
}

#[test]
fn a_missing_patches_strategic_merge_file_is_named() {
    let r = repo(&[
        (
            "clusters/prod/kustomization.yaml",
            "resources:\n  - ks.yaml\npatchesStrategicMerge:\n  - api-host.yaml\n",
        ),
        ("clusters/prod/ks.yaml", BASE_KS),
    ]);
    let err = overlay_api_host(r.path(), Path::new("clusters/prod")).expect_err("missing");
    match &err {
        FluxError::MissingResource { at, resource, .. } => {
            assert_eq!(resource, "api-host.yaml");
            assert_eq!(at.line, 4);
        }
        other => panic!("expected a missing patch file, got {other}"),
    }
}

#[test]
fn a_helm_release_taking_values_from_elsewhere_is_cannot_tell_at_the_field() {
    use hk_engine::repo::flux::{report, EngineChoice};
    let r = repo(&[
        ("clusters/prod/kustomization.yaml", "resources:\n  - ks.yaml\n"),
        (
            "clusters/prod/ks.yaml",
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: platform\nspec:\n  path: ./platform\n  postBuild:\n    substitute:\n      K3S_API_HOST: 192.168.2.9\n",
        ),
        (
            "platform/cilium/helmrelease.yaml",
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: cilium\nspec:\n  valuesFrom:\n    - kind: ConfigMap\n      name: cilium-values\n  values:\n    k8sServiceHost: ${K3S_API_HOST}\n",
        ),
    ]);
    let rep = report(
        r.path(),
        Path::new("clusters/prod"),
        &EngineChoice::Builtin,
        DEFAULT_FLUX_API_HOST_VAR,
    );
    assert_eq!(
        rep.overlay.as_ref().map(|v| v.value.as_str()).ok(),
        Some("192.168.2.9")
    );
    let helm = rep.helm.expect("the Flux path is looked at");
    match helm.values {
        Err(FluxError::CannotTell { at, what, .. }) => {
            assert_eq!(
                (at.file.as_path(), at.line),
                (Path::new("platform/cilium/helmrelease.yaml"), 7)
            );
            assert!(what.contains("valuesFrom"), "{what}");
        }
        other => panic!("expected cannot tell, got {other:?}"),
    }
}

#[test]
fn a_flux_kustomization_patching_what_it_applies_is_cannot_tell_for_the_helm_values() {
    use hk_engine::repo::flux::{report, EngineChoice};
    let r = repo(&[
        ("clusters/prod/kustomization.yaml", "resources:\n  - ks.yaml\n"),
        (
            "clusters/prod/ks.yaml",
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: platform\nspec:\n  path: ./platform\n  patches:\n    - patch: '[]'\n      target: {kind: HelmRelease}\n  postBuild:\n    substitute:\n      K3S_API_HOST: 192.168.2.9\n",
        ),
        ("platform/hr.yaml", "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: cilium\nspec:\n  values:\n    k8sServiceHost: ${K3S_API_HOST}\n"),
    ]);
    let rep = report(
        r.path(),
        Path::new("clusters/prod"),
        &EngineChoice::Builtin,
        DEFAULT_FLUX_API_HOST_VAR,
    );
    match rep.helm.expect("helm").values {
        Err(e @ FluxError::CannotTell { .. }) => {
            assert!(e.to_string().contains("spec.patches"), "{e}");
            // The field's content: its first entry, under `patches:` on line 7.
            assert_eq!(e.location().map(|l| l.line), Some(8));
        }
        other => panic!("expected cannot tell, got {other:?}"),
    }
}
