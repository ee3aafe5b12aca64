//! Inventory sources, as `ansible-inventory -i SOURCE...` takes them: which plugin reads a
//! file (Ansible's enabled plugins in order), a directory read file by file, several sources
//! into one inventory.
//!
//! Owns: the plugin choice and its refusals (an executable is the `script` plugin's, a
//! `plugin:` file the `auto` plugin's; a `.toml` only the toml plugin's), the directory walk and
//! what it skips, counting the files read. Must not: parse a format (`ini`, `yamlinv`) or
//! settle the graph and variables (`mod.rs`, once every source is in).

use std::path::{Path, PathBuf};

use super::ini::{decode_ini, IniParser};
use super::{tomlinv, yamlinv, Format, Inventory, InventoryError};
use crate::repo::vars;

/// Directories an inventory directory may nest (`inventory.max_dir_depth`).
pub const MAX_DIR_DEPTH: usize = 32;

/// Whether Ansible skips a directory entry of an inventory directory (`inventory/manager.py`
/// `IGNORED`): hidden names, `host_vars`, `group_vars`, `vars_plugins`, and names ending in
/// an ignored extension (`INVENTORY_IGNORE_EXTS`: `REJECT_EXTS` + `.orig`, `.cfg`,
/// `.retry`). `.ini`, `.yml`, `.json` and no extension are read.
pub fn is_ignored_in_dir(name: &std::ffi::OsStr) -> bool {
    const EXTS: [&[u8]; 12] = [
        b".pyc", b".pyo", b".swp", b".bak", b"~", b".rpm", b".md", b".txt", b".rst", b".orig",
        b".cfg", b".retry",
    ];
    let bytes = name.as_encoded_bytes();
    bytes.starts_with(b".")
        || matches!(bytes, b"host_vars" | b"group_vars" | b"vars_plugins")
        || EXTS.iter().any(|e| bytes.ends_with(e))
}

/// Whether Ansible's `script` plugin would take the file (`os.access(path, X_OK)`).
fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        false
    }
}

impl Inventory {
    /// Load an inventory source (a file, INI, YAML or JSON as Ansible's plugins choose, or a
    /// directory of them) plus the `group_vars/` and `host_vars/` of its base directory.
    pub fn load(path: &Path) -> Result<Inventory, InventoryError> {
        Self::load_sources(&[path.to_path_buf()])
    }

    /// Load several sources into one inventory, as `ansible-inventory -i A -i B` does: each
    /// file adds to the same groups and hosts, in order; the graph is settled once at the
    /// end; each source's base directory brings its `group_vars/`/`host_vars/`, a later
    /// source's winning. A directory is read file by file in byte order of the names, its
    /// subdirectories too, skipping what Ansible skips ([`is_ignored_in_dir`]). A file no
    /// plugin reads is refused (Ansible warns and goes on without it).
    pub fn load_sources(sources: &[PathBuf]) -> Result<Inventory, InventoryError> {
        let Some(first) = sources.first() else {
            return Err(InventoryError::Source {
                path: PathBuf::from("-i"),
                message: "no inventory source given".into(),
            });
        };
        let mut inv = Inventory::empty(first);
        let mut bases = Vec::with_capacity(sources.len());
        for source in sources {
            if source.is_dir() {
                let before = inv.files_read;
                inv = Self::read_dir_into(inv, source, 0)?;
                if inv.files_read == before {
                    return Err(InventoryError::Source {
                        path: source.clone(),
                        message: "an inventory directory with no inventory file in it (Ansible \
                                  would go on with no hosts from it): refused"
                            .into(),
                    });
                }
                // Ansible's `basedir` of a directory source is the directory itself.
                bases.push(source.clone());
            } else {
                inv = Self::read_path_into(inv, source)?;
                // Of a file: its own directory (a symlinked file is not followed), so
                // group_vars/ and host_vars/ are looked up beside the path given.
                bases.push(match source.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                    _ => PathBuf::from("."),
                });
            }
        }
        inv.finish_graph()?;
        inv.merge_vars(&bases)?;
        Ok(inv)
    }

    /// Every entry of `dir` Ansible reads, in its order (`sorted(os.listdir(...))`: bytes).
    fn read_dir_into(
        mut inv: Inventory,
        dir: &Path,
        depth: usize,
    ) -> Result<Inventory, InventoryError> {
        // Ansible follows directory links without end; a loop is refused here instead.
        if depth > MAX_DIR_DEPTH {
            return Err(InventoryError::Source {
                path: dir.to_path_buf(),
                message: format!(
                    "inventory directories nested more than {MAX_DIR_DEPTH} deep (a link loop?): refused"
                ),
            });
        }
        let io = |source| InventoryError::Io {
            path: dir.to_path_buf(),
            source,
        };
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io)? {
            names.push(entry.map_err(io)?.file_name());
        }
        names.sort();
        for name in names {
            if is_ignored_in_dir(&name) {
                continue;
            }
            let full = dir.join(&name);
            inv = if full.is_dir() {
                Self::read_dir_into(inv, &full, depth + 1)?
            } else {
                Self::read_path_into(inv, &full)?
            };
        }
        Ok(inv)
    }

    /// One inventory file added to `inv`.
    fn read_path_into(mut inv: Inventory, path: &Path) -> Result<Inventory, InventoryError> {
        let bytes = crate::repo::read::read_bytes(path).map_err(|e| match e {
            crate::repo::read::ReadError::Io { path, source } => {
                InventoryError::Io { path, source }
            }
            other => InventoryError::Refused(other),
        })?;
        // Ansible's `script` plugin takes an executable file first and runs it. A file with
        // no `#!` line cannot be run (execve says ENOEXEC), so the plugin fails and Ansible
        // reads the file with the next plugin, as a static inventory: so does hk-console.
        // One with a `#!` line is a program whose output decides the hosts: never run here.
        if is_executable(path) && bytes.starts_with(b"#!") {
            return Err(InventoryError::Syntax {
                file: path.to_path_buf(),
                line: 1,
                message: "an executable file with a `#!` line: Ansible's `script` inventory \
                          plugin would RUN it and take the hosts from its output; hk-console \
                          runs no inventory script, so it is refused (chmod -x it if it is a \
                          static inventory)"
                    .into(),
            });
        }
        let (text, warnings) = decode_ini(bytes, path);
        if vars::is_vaulted_text(&text) {
            return Err(InventoryError::Syntax {
                file: path.to_path_buf(),
                line: 1,
                message: "the inventory file is ansible-vault encrypted: vaulted, not read \
                          (expected a plain INI or YAML inventory)"
                    .into(),
            });
        }
        let utf8 = warnings.is_empty();
        inv.warnings.extend(warnings);
        Self::read_text_into(inv, &text, path, utf8)
    }

    /// Parse an inventory's text (no vars files) with the plugin Ansible would use for a
    /// file named `path`; `utf8` is whether the file's bytes were UTF-8 (Ansible's YAML
    /// loader refuses others, its INI reader does not).
    pub fn parse_source(text: &str, path: &Path, utf8: bool) -> Result<Inventory, InventoryError> {
        let mut inv = Self::read_text_into(Inventory::empty(path), text, path, utf8)?;
        inv.finish_graph()?;
        Ok(inv)
    }

    /// `text` (the file `path`) added to `inv` by the first plugin that reads it.
    fn read_text_into(
        inv: Inventory,
        text: &str,
        path: &Path,
        utf8: bool,
    ) -> Result<Inventory, InventoryError> {
        // The ini plugin refuses `.toml` by name; the yaml plugin does not take it either: the
        // toml plugin is the only one.
        if path.extension().is_some_and(|e| e == "toml") {
            if !utf8 {
                return Err(InventoryError::Syntax {
                    file: path.to_path_buf(),
                    line: 1,
                    message: "not TOML: bytes that are not UTF-8".into(),
                });
            }
            return Ok(tomlinv::parse_toml(inv, text, path)?.read_as(Format::Toml));
        }
        // `os.path.splitext`: the yaml plugin takes no extension or one of its list.
        let yaml_first = match path.extension() {
            None => true,
            Some(e) => matches!(e.to_str(), Some("yaml" | "yml" | "json")),
        };
        let mut yaml_failure = None;
        if yaml_first {
            let tried = if utf8 {
                // A failed plugin leaves nothing behind (Ansible keeps what it added before
                // failing, which only matters if the next plugin then reads the file).
                yamlinv::parse_yaml(inv.clone(), text, path)
            } else {
                Err(yamlinv::YamlFailure::NotRead {
                    error: InventoryError::Syntax {
                        file: path.to_path_buf(),
                        line: 1,
                        message: "not YAML: bytes that are not UTF-8".into(),
                    },
                    mapping: false,
                })
            };
            match tried {
                Ok(inv) => return Ok(inv.read_as(Format::Yaml)),
                Err(yamlinv::YamlFailure::Plugin(e)) => return Err(e),
                Err(yamlinv::YamlFailure::NotRead { error, mapping }) => {
                    yaml_failure = Some((error, mapping))
                }
            }
        }
        let mut p = IniParser::adding_to(inv, path);
        match (p.parse(text), yaml_failure) {
            (Ok(()), _) => Ok(p.inv.read_as(Format::Ini)),
            (Err(ini), None) => Err(ini),
            // Named `.yml`/`.yaml`/`.json`, or it loaded as a YAML mapping: its YAML error is
            // the one meant.
            (Err(ini), Some((yaml, mapping))) if mapping || path.extension().is_some() => {
                Err(InventoryError::NoPluginRead {
                    first: Box::new(yaml),
                    other_plugin: "INI",
                    other: Box::new(ini),
                })
            }
            (Err(ini), Some((yaml, _))) => Err(InventoryError::NoPluginRead {
                first: Box::new(ini),
                other_plugin: "YAML",
                other: Box::new(yaml),
            }),
        }
    }

    /// Count a file read in `format` (the layers' names follow it; several: neutral names).
    pub(super) fn read_as(mut self, format: Format) -> Inventory {
        self.format = if self.files_read == 0 || self.format == format {
            format
        } else {
            Format::Mixed
        };
        self.files_read += 1;
        self
    }
}
