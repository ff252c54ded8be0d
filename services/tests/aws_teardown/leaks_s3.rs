//! Issue #44's kind 5 in S3: CAPA's bootstrap bucket and objects, reported and never deleted.

use crate::fixtures::*;
use sweeper_aws::phases::{PassRequest, teardown_pass};
use sweeper_aws::testing::leaks::{
    bootstrap_bucket, bootstrap_object, bucket_exists, object_exists,
};

const HASH: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

/// The bucket the AWSCluster names, tagged CAPA-owned for the cluster, holding the cluster's
/// objects in CAPA's layout, another cluster's (same layout, same bucket) and keys of other
/// layouts; a second bucket tagged for the cluster that the object does not name. A dry run and
/// a real pass: CAPA's-layout objects of the named bucket and the bucket itself are reported
/// (with the bucket's tags quoted), nothing is deleted, the teardown is not held, no S3 delete is
/// called, and the other bucket is not even read. A bucket named but gone reports nothing.
#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn capas_bootstrap_bucket_and_objects_are_reported_never_deleted() {
    let (c, rec) = env().await;
    let f = retrying_clients().await;
    let n = cluster("boots3");
    let ours = format!("sigs.k8s.io/cluster-api-provider-aws/cluster/{n}");
    let bucket = format!("{n}-capa-boot");
    let elsewhere = format!("{n}-not-named");
    bootstrap_bucket(&f, &bucket, &[(ours.as_str(), "owned")]).await;
    bootstrap_bucket(&f, &elsewhere, &[(ours.as_str(), "owned")]).await;
    let capas = [
        format!("control-plane/{n}-control-plane-x7k2p"),
        format!("node/{n}-md-0-6d5f8-abcde"),
        format!("machine-pool/{n}-mp-0/{HASH}"),
        // Another cluster's machine in the same bucket: the same layout, no tag either way.
        format!("node/{n}-b-md-0-fghij"),
    ];
    let others = [
        "backups/etcd.db".to_string(),
        format!("node/{n}/nested"),
        format!("machine-pool/{n}-mp-0/not-a-hash"),
    ];
    for key in capas.iter().chain(&others) {
        bootstrap_object(&f, &bucket, key).await;
    }
    let unnamed_key = format!("node/{n}-md-0-zzzzz");
    bootstrap_object(&f, &elsewhere, &unnamed_key).await;

    let req = PassRequest {
        s3_bucket: Some(bucket.clone()),
        ..PassRequest::new(&n)
    };
    let arn = |key: &str| format!("arn:aws:s3:::{bucket}/{key}");
    let mut want: Vec<String> = capas.iter().map(|k| arn(k)).collect();
    want.push(format!("arn:aws:s3:::{bucket}"));
    want.sort();
    for dry_run in [true, false] {
        let r = teardown_pass(
            &c,
            &PassRequest {
                dry_run,
                ..req.clone()
            },
        )
        .await;
        let mut kept: Vec<String> = r
            .phases
            .iter()
            .flat_map(|p| p.kept.iter())
            .filter(|(r, _)| r.service == "s3")
            .map(|(r, _)| r.id.clone())
            .collect();
        kept.sort();
        assert_eq!(kept, want, "dry run {dry_run}: {r:#?}");
        let why = r
            .phases
            .iter()
            .flat_map(|p| p.kept.iter())
            .find(|(r, _)| r.kind == "bootstrap-bucket")
            .map(|(_, why)| why.clone())
            .unwrap_or_default();
        assert!(
            why.contains(&format!("{ours}=owned")) && why.contains("never deleted"),
            "{why}"
        );
        assert!(
            r.phases
                .iter()
                .all(|p| p.planned.is_empty() && p.deleted.is_empty()),
            "nothing planned or deleted: {r:#?}"
        );
        assert!(r.done, "a report never holds the teardown: {r:#?}");
    }
    for key in capas.iter().chain(&others) {
        assert!(object_exists(&f, &bucket, key).await, "{key} stays");
    }
    assert!(bucket_exists(&f, &bucket).await, "the named bucket stays");
    assert!(
        bucket_exists(&f, &elsewhere).await && object_exists(&f, &elsewhere, &unnamed_key).await,
        "a bucket the object does not name stays"
    );
    let calls = rec.calls();
    let s3: Vec<&String> = calls.iter().filter(|op| op.starts_with("S3.")).collect();
    assert!(
        s3.iter()
            .all(|op| *op == "S3.ListObjectsV2" || *op == "S3.GetBucketTagging"),
        "S3 is only read: {s3:?}"
    );
    assert_eq!(
        s3.iter().filter(|op| **op == "S3.GetBucketTagging").count(),
        2,
        "one bucket read per pass, only the named one: {s3:?}"
    );

    // Named, but gone (CAPA's own delete took it): nothing reported, nothing held.
    let gone = PassRequest {
        s3_bucket: Some(format!("{n}-gone")),
        ..PassRequest::new(&n)
    };
    let r = teardown_pass(&c, &gone).await;
    assert!(
        r.phases
            .iter()
            .flat_map(|p| p.kept.iter())
            .all(|(r, _)| r.service != "s3"),
        "{r:#?}"
    );
    assert!(r.done, "{r:#?}");
}
