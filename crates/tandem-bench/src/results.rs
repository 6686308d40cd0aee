//! `bench/RESULTS.md`, section by section: a run replaces the sections it measured and keeps
//! the others, so `--network-only` (a quarter of an hour alone on the machine) leaves the
//! local comparisons and the history table of the last full run in place.
//!
//! Each section starts with a marker line, `<!-- section: NAME -->` (a comment: Markdown
//! shows nothing of it), and runs to the next marker or the end.

/// The marker that opens the section `name`.
fn marker(name: &str) -> String {
    format!("<!-- section: {name} -->")
}

/// `old`'s sections with those in `new` replaced (in `old`'s order) and the ones `old` lacks
/// appended; text before `old`'s first marker (a file from before the markers) is dropped.
pub fn merge(old: &str, new: &[(&str, String)]) -> String {
    let mut sections: Vec<(String, String)> = Vec::new();
    for line in old.lines() {
        let name = line
            .strip_prefix("<!-- section: ")
            .and_then(|rest| rest.strip_suffix(" -->"));
        match (name, sections.last_mut()) {
            (Some(name), _) => sections.push((name.to_owned(), String::new())),
            (None, Some((_, body))) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    for (name, body) in new {
        let body = format!("{}\n\n", body.trim_end());
        match sections.iter_mut().find(|(n, _)| n == name) {
            Some((_, old)) => *old = body,
            None => sections.push(((*name).to_owned(), body)),
        }
    }
    let mut out = String::new();
    for (name, body) in &sections {
        out.push_str(&marker(name));
        out.push('\n');
        out.push_str(body.trim_end());
        out.push_str("\n\n");
    }
    format!("{}\n", out.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_replaces_only_the_sections_it_measured() {
        let old = merge(
            "",
            &[
                ("local", "| a | 1 |".into()),
                ("network", "| n | 1 |".into()),
                ("history", "| h | 1 |".into()),
            ],
        );
        let new = merge(&old, &[("network", "| n | 2 |\n| n | 3 |".into())]);
        assert_eq!(
            new,
            "<!-- section: local -->\n| a | 1 |\n\n<!-- section: network -->\n| n | 2 |\n| n | 3 |\n\n<!-- section: history -->\n| h | 1 |\n"
        );
        assert_eq!(merge(&new, &[]), new, "reading and writing keeps the file");
    }

    #[test]
    fn a_file_without_sections_is_replaced_by_the_run() {
        let new = merge("| old table |\n", &[("local", "| a |".into())]);
        assert_eq!(new, "<!-- section: local -->\n| a |\n");
    }
}
