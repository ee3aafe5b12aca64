//! The static parity contract (L0). Owned by the checks work; see issue 2.
