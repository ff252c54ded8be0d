//! The Route53 records external-dns made for the cluster's load balancers (phase 2,
//! `dns-record`). external-dns owns a record through a companion TXT record
//! `heritage=external-dns,external-dns/owner=<owner-id>,…` (at the record's own name, or at
//! `<type>-<name>` in its newer format), and deletes the pair only while it runs. The owner id
//! defaults to `default`, shared by every cluster that kept the default (external-dns#1758), so
//! the TXT record alone never says whose a record is.
//!
//! - **Found** ([`owned_records`]): an `A`/`AAAA` alias or a `CNAME` whose target is the DNS name
//!   of one of phase 2's load balancers (those the phase-2 rule gave: `shared` and other
//!   clusters' already left out), and external-dns owns it (the TXT companion). Anything else is
//!   not looked at: it is not the cluster's to report.
//! - **Deleted** ([`fates`]: `Fate::Delete`, with the TXT sets that go with it) only when the
//!   cluster names its owner id (annotation `sweeper.dev/external-dns-owner-id`, valid: see
//!   [`owner_id_problem`], never `default`), the record's TXT companion says exactly that id, its
//!   load balancer is deleted by this pass (task `load-balancer` selected: [`Allowed`]), it has
//!   no routing policy's set identifier, and every TXT set that goes with it holds only
//!   external-dns values of that owner; an older-format TXT set (at the record's own name) goes
//!   only with every record it owns.
//! - **Kept** (`Fate::Keep`, the phase's report-only `kept`: `gc plan`, the audit record, the
//!   `ExternalDnsRecordsLeft` Event) otherwise, with the reason; a report never holds the
//!   teardown. `Fate` is this kind's [`Verdict`](super::Verdict): its delete carries the TXT
//!   companions, and nothing here is foreign or blocked once found.
//!
//! Not handled: external-dns's `--txt-prefix`/`--txt-suffix` companions (such records are not
//! found, so neither reported nor deleted), and routing-policy records (reported only). Pure, so
//! every "must not delete" case is unit-tested here.

use std::collections::HashSet;

/// The owner id every external-dns shares that kept the default (external-dns#1758): it never
/// says whose a record is, so records it owns are never deleted, whatever the annotation says.
pub const DEFAULT_OWNER: &str = "default";

/// Longest owner id accepted: a DNS name's length, far beyond what anyone configures.
pub const MAX_OWNER_ID: usize = 253;

/// Why `id` cannot be an external-dns owner id to delete by, or `None` when it can. The owner
/// id sits in a TXT value `heritage=external-dns,external-dns/owner=<id>,…` that external-dns
/// writes and parses as comma-separated `key=value` pairs inside one quoted string: an id with a
/// comma, `=`, quote, space or other control character could never be read back from that
/// value, so such an id names no records and is refused rather than matched approximately.
pub fn owner_id_problem(id: &str) -> Option<String> {
    if id.is_empty() {
        return Some("it is empty".into());
    }
    if id.eq_ignore_ascii_case(DEFAULT_OWNER) {
        return Some(
            "\"default\" is the owner id every external-dns shares that kept the default \
             (external-dns#1758); its records are never deleted"
                .into(),
        );
    }
    if id.len() > MAX_OWNER_ID {
        return Some(format!(
            "it is {} characters long; at most {MAX_OWNER_ID}",
            id.len()
        ));
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '/')))
    {
        return Some(format!(
            "it holds {c:?}: an owner id external-dns writes into its TXT records is made of \
             letters, digits and - _ . : /"
        ));
    }
    None
}

/// One record set as the rule needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rec {
    pub name: String,
    pub ty: String,
    /// An alias record's target DNS name.
    pub alias: Option<String>,
    pub values: Vec<String>,
    /// Weighted, latency, failover… records: one name and type, several sets.
    pub set_id: Option<String>,
}

/// An external-dns record pointing at one of the load balancers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owned {
    /// Its index in the zone's record sets.
    pub record: usize,
    pub name: String,
    pub ty: String,
    /// The name of its TXT companion (the one whose owner is reported).
    pub txt: String,
    pub owner: String,
    /// The load balancer DNS name it points at.
    pub target: String,
}

/// A DNS name made comparable: lower case, no trailing dot, no `dualstack.` prefix (Route53
/// aliases to an ELB are written `dualstack.<lb dns name>.`).
pub fn dns_key(name: &str) -> String {
    let n = name.trim().trim_end_matches('.').to_ascii_lowercase();
    n.strip_prefix("dualstack.")
        .map(str::to_string)
        .unwrap_or(n)
}

/// The owner id of an external-dns TXT value (`"heritage=external-dns,external-dns/owner=x,…"`),
/// or `None` for any other TXT value.
pub fn external_dns_owner(txt: &str) -> Option<String> {
    let v = txt.trim().trim_matches('"');
    let mut heritage = false;
    let mut owner = None;
    for part in v.split(',') {
        match part.split_once('=') {
            Some(("heritage", "external-dns")) => heritage = true,
            Some(("external-dns/owner", o)) => owner = Some(o.to_string()),
            _ => {}
        }
    }
    owner.filter(|_| heritage)
}

/// The newer format's companion name of a record (`a-www.example.com.`), then the older one's
/// (the record's own name).
fn companion_names(r: &Rec) -> [String; 2] {
    [
        format!("{}-{}", r.ty.to_ascii_lowercase(), r.name),
        r.name.clone(),
    ]
}

/// The external-dns records among one zone's `sets` that point at one of `lbs` (DNS keys), with
/// their TXT companion.
pub fn owned_records(sets: &[Rec], lbs: &HashSet<String>) -> Vec<Owned> {
    let txt_owner = |name: &str| {
        sets.iter()
            .filter(|s| s.ty == "TXT" && dns_key(&s.name) == dns_key(name))
            .flat_map(|s| s.values.iter())
            .find_map(|v| external_dns_owner(v))
    };
    let mut out = Vec::new();
    for (i, s) in sets.iter().enumerate() {
        let target = match s.ty.as_str() {
            "A" | "AAAA" => s.alias.as_deref().map(dns_key),
            "CNAME" => s.values.first().map(|v| dns_key(v)),
            _ => None,
        };
        let Some(target) = target.filter(|t| lbs.contains(t)) else {
            continue;
        };
        let found = companion_names(s)
            .into_iter()
            .find_map(|txt| txt_owner(&txt).map(|owner| (txt, owner)));
        if let Some((txt, owner)) = found {
            out.push(Owned {
                record: i,
                name: s.name.clone(),
                ty: s.ty.clone(),
                txt,
                owner,
                target,
            });
        }
    }
    out
}

/// What the cluster allows to be deleted in this pass.
#[derive(Clone, Copy, Debug)]
pub struct Allowed<'a> {
    /// The owner id the cluster names (annotation `sweeper.dev/external-dns-owner-id`), valid.
    pub owner: Option<&'a str>,
    /// This pass deletes the load balancers `owned_records` was given (task `load-balancer`
    /// selected). Without that, deleting a record would take a working name from a live load
    /// balancer.
    pub lbs_deleted: bool,
}

impl<'a> Allowed<'a> {
    /// From what the cluster names (`owner`, as its annotation reads) and whether this pass
    /// deletes the load balancers: an owner id with a problem ([`owner_id_problem`]) names no
    /// record.
    pub fn of(owner: Option<&'a str>, lbs_deleted: bool) -> Self {
        Allowed {
            owner: owner.filter(|o| owner_id_problem(o).is_none()),
            lbs_deleted,
        }
    }

    /// The owner id whose records this pass deletes, when it deletes any: a valid one, and the
    /// load balancers go.
    pub fn deleting(&self) -> Option<&'a str> {
        self.owner.filter(|_| self.lbs_deleted)
    }
}

/// What becomes of one owned record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Deleted with these TXT companions (indices in the zone's sets), all in one change batch.
    Delete { txts: Vec<usize> },
    /// Reported, not deleted, for this reason.
    Keep(String),
}

/// Decides each of `owned` (from [`owned_records`] on `sets`). A record is deleted only when all
/// of these hold: its load balancer is deleted in this pass; the cluster names an owner id and
/// the record's TXT companion says exactly that id (never `default`); it is a plain record (no
/// routing policy's set identifier, whose pairing with a TXT record this rule does not follow);
/// and each TXT record set that goes with it holds nothing but external-dns values of that owner
/// (a DELETE removes a whole set, so a set holding anything else stays, and its record too).
///
/// The TXT sets deleted with it: its newer-format companion (`<type>-<name>`), and the
/// older-format one at its own name, which owns every record type at that name and so goes only
/// when every other record set at that name is deleted too (external-dns writes both formats
/// while it migrates).
pub fn fates(sets: &[Rec], owned: &[Owned], allowed: Allowed<'_>) -> Vec<Fate> {
    // First each record on its own, then the older-format TXT sets shared by a name.
    let mut out: Vec<Fate> = owned
        .iter()
        .map(|o| record_fate(sets, o, allowed))
        .collect();
    if let Some(owner) = allowed.owner {
        let mut names: Vec<String> = owned.iter().map(|o| dns_key(&o.name)).collect();
        names.sort_unstable();
        names.dedup();
        for name in names {
            older_format_at(&name, sets, owned, owner, &mut out);
        }
    }
    out
}

/// A TXT record set that holds nothing but external-dns values of `owner` (a DELETE removes a
/// whole set, so one holding anything else must stay).
fn only_owners_txt(s: &Rec, owner: &str) -> bool {
    s.ty == "TXT"
        && !s.values.is_empty()
        && s.values
            .iter()
            .all(|v| external_dns_owner(v).as_deref() == Some(owner))
}

/// One record's fate on its own: kept with the first reason that holds, else deleted with its
/// newer-format companion (an older-format one is decided per name, [`older_format_at`]).
fn record_fate(sets: &[Rec], o: &Owned, allowed: Allowed<'_>) -> Fate {
    let Some(owner) = allowed.owner else {
        return Fate::Keep(
            "the cluster names no external-dns owner id (annotation \
             sweeper.dev/external-dns-owner-id): reported, not deleted"
                .into(),
        );
    };
    if !allowed.lbs_deleted {
        return Fate::Keep(
            "its load balancer is not deleted by this teardown (task load-balancer not \
             selected): kept"
                .into(),
        );
    }
    if o.owner.eq_ignore_ascii_case(DEFAULT_OWNER) {
        return Fate::Keep(
            "owner id \"default\" is shared by every external-dns that kept the default: \
             never deleted"
                .into(),
        );
    }
    if o.owner != owner {
        return Fate::Keep(format!(
            "its owner id is not the cluster's ({owner:?}): kept"
        ));
    }
    if sets[o.record].set_id.is_some() {
        return Fate::Keep(
            "a routing-policy record (set identifier): reported, not deleted".into(),
        );
    }
    let [newer, older] = companion_names(&sets[o.record]);
    let companion = dns_key(if o.txt == newer { &newer } else { &older });
    let txts: Vec<usize> = sets
        .iter()
        .enumerate()
        .filter(|(_, s)| s.ty == "TXT" && dns_key(&s.name) == companion)
        .map(|(i, _)| i)
        .collect();
    if txts.iter().any(|&i| !only_owners_txt(&sets[i], owner)) {
        return Fate::Keep(format!(
            "its TXT record {} holds values other than external-dns's for {owner:?}: kept",
            o.txt
        ));
    }
    // An older-format set is added per name, where every record it owns goes.
    let txts = if o.txt == newer { txts } else { Vec::new() };
    Fate::Delete { txts }
}

/// The older-format TXT set at `name` (a DNS key), which owns every record type there: deleted
/// with the first record at the name when every record set there goes and it is all `owner`'s;
/// otherwise it stays, and so does a record whose only companion it is, rather than leaving the
/// others unowned.
fn older_format_at(name: &str, sets: &[Rec], owned: &[Owned], owner: &str, out: &mut [Fate]) {
    let here: Vec<usize> = (0..owned.len())
        .filter(|&k| dns_key(&owned[k].name) == name && matches!(out[k], Fate::Delete { .. }))
        .collect();
    let deleted: HashSet<usize> = here.iter().map(|&k| owned[k].record).collect();
    let all_go = sets
        .iter()
        .enumerate()
        .filter(|(_, s)| s.ty != "TXT" && dns_key(&s.name) == name)
        .all(|(i, _)| deleted.contains(&i));
    let older: Vec<usize> = sets
        .iter()
        .enumerate()
        .filter(|(_, s)| s.ty == "TXT" && dns_key(&s.name) == name)
        .map(|(i, _)| i)
        .collect();
    let older_ours = !older.is_empty() && older.iter().all(|&i| only_owners_txt(&sets[i], owner));
    if all_go && older_ours {
        // Once, with the first record at the name: the batch deletes it once.
        if let Some(&k) = here.first()
            && let Fate::Delete { txts } = &mut out[k]
        {
            txts.extend(older);
        }
        return;
    }
    for k in here {
        if matches!(&out[k], Fate::Delete { txts } if txts.is_empty()) {
            out[k] = Fate::Keep(format!(
                "its TXT record {} also owns records at {} that stay: kept",
                owned[k].txt, owned[k].name
            ));
        }
    }
}

#[cfg(test)]
mod tests;
