//! Bulk deletes shared by the benchmark drivers (`#[path = "support/objects.rs"] mod objects;`:
//! an example is one crate, so a shared file is included rather than imported).

use futures::StreamExt;
use kube::Api;
use kube::api::DeleteParams;

/// Deletes each `(api, name)` with `in_flight` deletions at once; one already gone is fine, any
/// other failure stops the benchmark (its figures would be wrong).
pub async fn delete_each<K>(objects: Vec<(Api<K>, String)>, in_flight: usize)
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    futures::stream::iter(objects)
        .map(|(api, name)| async move {
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => panic!("delete {name}: {e}"),
            }
        })
        .buffer_unordered(in_flight)
        .collect::<Vec<()>>()
        .await;
}
