//! The role × subject matrix of docs/SECURITY.md, from the same table the
//! generator uses.

use crate::subjects::Subjects;

use super::nats::permissions;
use super::redis_acl::rules;
use super::{Role, ROLES};

/// The person shown in the matrix as an example.
pub const EXAMPLE_PERSON: &str = "alice";

fn cell(items: &[String]) -> String {
    if items.is_empty() {
        return "–".into();
    }
    items
        .iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join("<br>")
}

fn roles() -> Vec<Role> {
    ROLES
        .into_iter()
        .chain([Role::Person(EXAMPLE_PERSON.into())])
        .collect()
}

/// The markdown between the `permissions` markers of docs/SECURITY.md:
/// the NATS table and the Redis table, under the default prefix.
pub fn permissions_matrix() -> String {
    let s = Subjects::default();
    let mut out = String::from(
        "| user | may publish | may never publish | may subscribe |\n|---|---|---|---|\n",
    );
    for role in roles() {
        let p = permissions(&role, &s);
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            role.user(),
            cell(&p.publish_allow),
            cell(&p.publish_deny),
            cell(&p.subscribe_allow)
        ));
    }
    out.push_str(
        "\nEvery user also has `allow_responses: true` (it may answer a request it received).\n\n",
    );
    out.push_str("| Redis user | rules |\n|---|---|\n");
    out.push_str("| `default` | `off` (anonymous connections are refused) |\n");
    for role in roles() {
        let r = rules(&role, s.prefix()).unwrap_or_else(|| "none: does not use Redis".into());
        // `|` inside a cell ends it, even inside backticks.
        let r = r.replace('|', "\\|");
        out.push_str(&format!("| `{}` | `{r}` |\n", role.user()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEGIN: &str = "<!-- permissions:begin (generated from shared::auth; CAUCUS_BLESS=1 cargo test -p caucus-shared permissions_matrix rewrites it) -->\n";
    const END: &str = "<!-- permissions:end -->";

    /// SECURITY.md's matrix is the generator's table: a permission added
    /// or removed in the code shows up as a failing diff here until the
    /// docs say the same.
    #[test]
    fn security_md_permissions_matrix_matches_the_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/SECURITY.md");
        let doc = std::fs::read_to_string(path).expect("docs/SECURITY.md");
        let start = doc.find(BEGIN).map(|i| i + BEGIN.len());
        let end = doc.find(END);
        let (Some(start), Some(end)) = (start, end) else {
            panic!("docs/SECURITY.md lacks the permissions markers:\n{BEGIN}{END}");
        };
        let want = permissions_matrix();
        if doc[start..end] != want {
            if std::env::var_os("CAUCUS_BLESS").is_some() {
                let new = format!("{}{}{}", &doc[..start], want, &doc[end..]);
                std::fs::write(path, new).expect("write SECURITY.md");
                return;
            }
            panic!(
                "docs/SECURITY.md's matrix differs from shared::auth; \
                 run CAUCUS_BLESS=1 cargo test -p caucus-shared permissions_matrix\n\
                 --- in the docs ---\n{}\n--- from the table ---\n{want}",
                &doc[start..end]
            );
        }
    }
}
