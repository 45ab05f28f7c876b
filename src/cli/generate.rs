//! Placeholder: man pages and completions generator (being written).
