//! Krake-style queries over the dependency graph, served on the HTTP port and used by
//! `sweeper graph`: dependents and dependencies of any object, and a full dump (JSON or DOT).
//! Answered from memory under the read lock: no API calls.

use super::context::Ctx;
use crate::engine::graph::Graph;
use crate::engine::graph::node::Node;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Debug, Deserialize)]
pub struct ObjectQuery {
    /// `group/version/kind`, or `version/kind` for the core group.
    pub gvk: String,
    #[serde(default)]
    pub namespace: Option<String>,
    pub name: String,
    /// Follow edges all the way down (dependents) or up (dependencies).
    #[serde(default)]
    pub transitive: bool,
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq, Clone)]
#[serde(rename_all = "camelCase")]
pub struct ObjectView {
    pub api_version: String,
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub namespace: Option<String>,
    pub name: String,
    pub uid: String,
    /// False for virtual nodes: referenced as an owner, never observed.
    pub observed: bool,
    pub deleting: bool,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Dump {
    pub nodes: Vec<ObjectView>,
    /// `[owner uid, dependent uid, blockOwnerDeletion]`
    pub edges: Vec<(String, String, bool)>,
}

/// Splits `group/version/kind` (`version/kind` for core) into (group, kind).
pub fn parse_gvk(s: &str) -> Option<(String, String)> {
    let parts: Vec<&str> = s.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        [_, kind] if !kind.is_empty() => Some((String::new(), kind.to_string())),
        [group, _, kind] if !kind.is_empty() => Some((group.to_string(), kind.to_string())),
        _ => None,
    }
}

fn view(g: &Graph, n: &Node) -> ObjectView {
    let k = g.kinds.info(n.kind);
    ObjectView {
        api_version: k.api_version.clone(),
        kind: k.kind.clone(),
        namespace: g.namespace(n.namespace).map(str::to_string),
        name: n.name.to_string(),
        uid: g.uid_text(&n.uid),
        observed: n.observed(),
        deleting: n.has(crate::engine::graph::node::flag::DELETING),
    }
}

pub fn dependents(g: &Graph, start: &Node, transitive: bool) -> Vec<ObjectView> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut stack: Vec<&Node> = g.dependents(start).collect();
    while let Some(n) = stack.pop() {
        if !seen.insert(n.uid) {
            continue; // cycles are possible
        }
        out.push(view(g, n));
        if transitive {
            stack.extend(g.dependents(n));
        }
    }
    out
}

pub fn dependencies(g: &Graph, start: &Node, transitive: bool) -> Vec<ObjectView> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut stack: Vec<&Node> = start.owners.iter().filter_map(|l| g.get(&l.uid)).collect();
    while let Some(n) = stack.pop() {
        if !seen.insert(n.uid) {
            continue;
        }
        out.push(view(g, n));
        if transitive {
            stack.extend(n.owners.iter().filter_map(|l| g.get(&l.uid)));
        }
    }
    out
}

pub fn dump(g: &Graph) -> Dump {
    let mut edges = Vec::new();
    for n in g.iter() {
        for l in n.owners.iter() {
            edges.push((g.uid_text(&l.uid), g.uid_text(&n.uid), l.blocks()));
        }
    }
    Dump {
        nodes: g.iter().map(|n| view(g, n)).collect(),
        edges,
    }
}

pub fn to_dot(d: &Dump) -> String {
    let mut s = String::from("digraph sweeper {\n  rankdir=LR;\n");
    for n in &d.nodes {
        let label = match &n.namespace {
            Some(ns) => format!("{}\\n{}/{}", n.kind, ns, n.name),
            None => format!("{}\\n{}", n.kind, n.name),
        };
        let style = if n.observed { "" } else { ", style=dashed" };
        s.push_str(&format!(
            "  \"{}\" [label=\"{}\"{}];\n",
            n.uid,
            label.replace('"', "'"),
            style
        ));
    }
    for (owner, dep, block) in &d.edges {
        let style = if *block { " [style=bold]" } else { "" };
        s.push_str(&format!("  \"{owner}\" -> \"{dep}\"{style};\n"));
    }
    s.push_str("}\n");
    s
}

fn find<'a>(g: &'a Graph, q: &ObjectQuery) -> Result<&'a Node, Box<Response>> {
    let (group, kind) = parse_gvk(&q.gvk)
        .ok_or_else(|| {
            (
                StatusCode::BAD_REQUEST,
                format!(
                    "bad gvk {:?}: use group/version/kind (version/kind for core)",
                    q.gvk
                ),
            )
                .into_response()
        })
        .map_err(Box::new)?;
    g.find(&group, &kind, q.namespace.as_deref(), &q.name)
        .ok_or_else(|| {
            (
                StatusCode::NOT_FOUND,
                format!(
                    "{} {}/{} is not in the graph",
                    q.gvk,
                    q.namespace.as_deref().unwrap_or(""),
                    q.name
                ),
            )
                .into_response()
        })
        .map_err(Box::new)
}

async fn get_dependents(State(ctx): State<Arc<Ctx>>, Query(q): Query<ObjectQuery>) -> Response {
    let g = ctx.read();
    match find(&g, &q) {
        Ok(n) => axum::Json(dependents(&g, n, q.transitive)).into_response(),
        Err(r) => *r,
    }
}

async fn get_dependencies(State(ctx): State<Arc<Ctx>>, Query(q): Query<ObjectQuery>) -> Response {
    let g = ctx.read();
    match find(&g, &q) {
        Ok(n) => axum::Json(dependencies(&g, n, q.transitive)).into_response(),
        Err(r) => *r,
    }
}

#[derive(Deserialize)]
struct DumpQuery {
    #[serde(default)]
    format: Option<String>,
}

async fn get_dump(State(ctx): State<Arc<Ctx>>, Query(q): Query<DumpQuery>) -> Response {
    let d = dump(&ctx.read());
    match q.format.as_deref() {
        Some("dot") => to_dot(&d).into_response(),
        None | Some("json") => axum::Json(d).into_response(),
        Some(other) => (
            StatusCode::BAD_REQUEST,
            format!("unknown format {other:?}: json or dot"),
        )
            .into_response(),
    }
}

pub fn router(ctx: Arc<Ctx>) -> Router {
    Router::new()
        .route("/graph/dependents", get(get_dependents))
        .route("/graph/dependencies", get(get_dependencies))
        .route("/graph", get(get_dump))
        .with_state(ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gvk_forms() {
        assert_eq!(
            parse_gvk("apps/v1/Deployment"),
            Some(("apps".into(), "Deployment".into()))
        );
        assert_eq!(
            parse_gvk("v1/ConfigMap"),
            Some(("".into(), "ConfigMap".into()))
        );
        assert_eq!(
            parse_gvk("/v1/ConfigMap"),
            Some(("".into(), "ConfigMap".into()))
        );
        assert_eq!(parse_gvk("ConfigMap"), None);
        assert_eq!(parse_gvk("a/b/c/d"), None);
    }

    #[test]
    fn dot_marks_virtual_nodes_and_blocking_edges() {
        let d = Dump {
            nodes: vec![ObjectView {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some("ns".into()),
                name: "a".into(),
                uid: "u1".into(),
                observed: false,
                deleting: false,
            }],
            edges: vec![("u0".into(), "u1".into(), true)],
        };
        let dot = to_dot(&d);
        assert!(dot.contains("style=dashed"));
        assert!(dot.contains("\"u0\" -> \"u1\" [style=bold]"));
    }
}
