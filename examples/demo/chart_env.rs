//! `demo chart-env < rendered.yaml`: reads the Helm chart as rendered, finds the Deployment and
//! prints what scripts/demo.sh needs to run the binary exactly as the pod would, one per line:
//! `replicas N`, `arg A`, `env NAME=VALUE`, `fieldref NAME PATH` (downward API values, which the
//! script fills in). Anything else (a Secret reference) is refused: the demo passes credentials
//! from its own environment, and says so.

use crate::kube_util::Res;
use serde::Deserialize;
use serde_json::Value;
use std::io::Read;

pub fn run() -> Res<()> {
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text)?;
    for line in lines(&text)? {
        println!("{line}");
    }
    Ok(())
}

fn lines(text: &str) -> Res<Vec<String>> {
    let mut deployment = None;
    for doc in serde_yaml::Deserializer::from_str(text) {
        let v = Value::deserialize(doc)?;
        if v["kind"] == "Deployment" {
            deployment = Some(v);
        }
    }
    let d = deployment.ok_or("no Deployment in the rendered chart")?;
    let container = &d["spec"]["template"]["spec"]["containers"][0];
    let mut out = vec![format!(
        "replicas {}",
        d["spec"]["replicas"].as_u64().unwrap_or(1)
    )];
    for a in container["args"].as_array().into_iter().flatten() {
        out.push(format!("arg {}", a.as_str().ok_or("a non-string arg")?));
    }
    for e in container["env"].as_array().into_iter().flatten() {
        let name = e["name"].as_str().ok_or("an env entry without a name")?;
        if let Some(v) = e.get("value") {
            let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
            out.push(format!("env {name}={v}"));
        } else if let Some(path) = e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
            out.push(format!("fieldref {name} {path}"));
        } else {
            return Err(format!("env {name}: only values and fieldRefs are supported here").into());
        }
    }
    Ok(out)
}
