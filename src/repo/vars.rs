//! (in progress: the inventory work replaces this file)
use std::path::PathBuf;
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Origin {
    pub file: PathBuf,
    pub line: usize,
    pub col: usize,
}
