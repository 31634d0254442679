//! Where the controller reads and writes Secrets: the install's own namespace, where it
//! keeps a copy of each pool's pull Secret (the only Secrets the agents may read), and the
//! namespaces the admin allowed it to read source Secrets in.

use std::collections::BTreeSet;

use sha2::{Digest as _, Sha256};

/// The prefix of a pull Secret's copy: `bootc-pull-<pool>`.
pub const COPY_PREFIX: &str = "bootc-pull-";
/// The label every copy carries (with [`MANAGED_BY`]), by which the controller watches them.
pub const COPY_LABEL: &str = "node.bootc.dev/pull-secret-copy";
/// `app.kubernetes.io/managed-by` of every copy.
pub const MANAGED_BY: &str = "bootc-pool-controller";
/// The annotation naming a copy's source Secret (`namespace/name`).
pub const SOURCE_ANNOTATION: &str = "node.bootc.dev/pull-secret-source";
/// The annotation carrying the hash of a copy's content (as `pullSecretHash` gives it), so
/// that an unchanged copy is known as such without reading its content.
pub const HASH_ANNOTATION: &str = "node.bootc.dev/pull-secret-hash";
/// The longest Secret name (a DNS subdomain).
const NAME_MAX: usize = 253;
/// Hex digits of the pool name's hash a shortened copy name ends with.
const HASH_LEN: usize = 10;

/// The install's namespace and the namespaces source Secrets may be read in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretNamespaces {
    /// Where the copies live (the controller's own namespace).
    pub install: String,
    /// Where pools' pull Secrets and webhook Secrets may be read.
    pub allowed: BTreeSet<String>,
}

impl Default for SecretNamespaces {
    fn default() -> Self {
        SecretNamespaces::new("bootc-system", [])
    }
}

impl SecretNamespaces {
    /// Copies in `install`; sources read in `allowed`, or in `install` when none is given.
    pub fn new(install: &str, allowed: impl IntoIterator<Item = String>) -> Self {
        let mut allowed: BTreeSet<String> = allowed.into_iter().collect();
        if allowed.is_empty() {
            allowed.insert(install.to_owned());
        }
        SecretNamespaces {
            install: install.to_owned(),
            allowed,
        }
    }

    /// Whether source Secrets in `namespace` may be read.
    pub fn allows(&self, namespace: &str) -> bool {
        self.allowed.contains(namespace)
    }

    /// Why Secret `namespace/name` is not read, and how an admin allows it.
    pub fn not_allowed(&self, what: &str, namespace: &str, name: &str) -> String {
        let allowed: Vec<&str> = self.allowed.iter().map(String::as_str).collect();
        format!(
            "the {what} {namespace}/{name} is in a namespace the controller may not read Secrets in \
             (allowed: {}); nothing of it is used. To allow it, add {namespace} to the controller's \
             --pull-secret-namespaces and give the controller's service account a Role and \
             RoleBinding in {namespace} with get, list and watch on secrets; or keep the Secret in \
             an allowed namespace",
            allowed.join(", ")
        )
    }
}

/// The name of pool `pool`'s copy: `bootc-pull-<pool>`; a name that would be longer than
/// a Secret name may be is cut and ends with a hash of the whole pool name instead.
pub fn copy_name(pool: &str) -> String {
    let name = format!("{COPY_PREFIX}{pool}");
    if name.len() <= NAME_MAX {
        return name;
    }
    let hash = Sha256::digest(pool.as_bytes());
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    let keep = NAME_MAX - COPY_PREFIX.len() - 1 - HASH_LEN;
    // Pool names are ASCII DNS subdomains; a label must not end in '-' or '.'.
    let cut = pool.get(..keep).unwrap_or(pool);
    let cut = cut.trim_end_matches(['-', '.']);
    format!("{COPY_PREFIX}{cut}-{}", &hex[..HASH_LEN])
}

#[cfg(test)]
mod tests {
    use super::*;
    use bootc_crds::selector::check_dns_subdomain;

    #[test]
    fn copies_are_named_after_their_pool() {
        assert_eq!(copy_name("workers"), "bootc-pull-workers");
        let longest_plain = "a".repeat(NAME_MAX - COPY_PREFIX.len());
        assert_eq!(
            copy_name(&longest_plain),
            format!("bootc-pull-{longest_plain}")
        );
    }

    #[test]
    fn long_pool_names_give_valid_distinct_names() {
        let a = format!("{}x-a", "abcdefghij.".repeat(22));
        let b = format!("{}x-b", "abcdefghij.".repeat(22));
        // Cut right after a dot, which must not end the name.
        let dots = format!("{}{}", "a.".repeat(120), "b".repeat(13));
        let longest = format!("{}{}", "abcdefghij.".repeat(22), "k".repeat(11));
        for pool in [&a, &b, &dots, &longest] {
            assert!(check_dns_subdomain(pool).is_ok(), "{pool}");
            let name = copy_name(pool);
            assert!(name.len() <= NAME_MAX, "{name}");
            assert!(check_dns_subdomain(&name).is_ok(), "{name}");
            assert_eq!(copy_name(pool), name, "stable");
        }
        assert_ne!(copy_name(&a), copy_name(&b));
    }

    #[test]
    fn sources_are_read_in_the_install_namespace_unless_others_are_allowed() {
        let own = SecretNamespaces::new("bootc-system", []);
        assert!(own.allows("bootc-system"));
        assert!(!own.allows("default"));
        let more = SecretNamespaces::new("bootc-system", ["apps".to_owned()]);
        assert!(more.allows("apps"));
        assert!(!more.allows("bootc-system"));
        let message = own.not_allowed("pull Secret", "apps", "pull");
        for part in [
            "apps/pull",
            "--pull-secret-namespaces",
            "Role",
            "bootc-system",
        ] {
            assert!(message.contains(part), "{part}: {message}");
        }
    }
}
