//! The effective K3S_API_HOST of a Flux overlay, for every way kustomize lets an overlay set
//! it, with the file:line where the winning value was written.

use std::path::{Path, PathBuf};

use hk_console::repo::flux::{overlay_api_host, FluxError, OverlayValue, SetBy};

fn fixture(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
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
fn flux_substitute_written_directly_in_a_multi_document_overlay() {
    let v = ok("direct");
    assert_eq!(v.value, "192.168.2.9");
    assert_eq!(v.set_by, SetBy::Substitute);
    assert_eq!(v.kustomization, "flux-system/platform");
    assert_at(&v, "clusters/prod/kustomization.yaml", 20, 21);
    assert_eq!(v.kustomization_at.line, 10);
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
    assert!(
        msg.contains("clusters/prod/kustomization.yaml:19:"),
        "{msg}"
    );
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
