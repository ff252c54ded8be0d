//! Sending a list or a watch and reading what the API server answered: an error `Status`, in
//! JSON or in protobuf, as the same `kube::Error::Api` kube's own requests give (so a 410 is a 410
//! whatever the encoding), or a body to read as it arrives.

use super::proto;
use futures::{AsyncBufRead, TryStreamExt};
use http_body_util::BodyExt;
use kube::Client;
use kube::client::Body;
use kube::core::Status;

/// Sends `request` with `accept`; an answer outside 2xx is returned as `kube::Error::Api`.
pub async fn send(
    client: &Client,
    mut request: http::Request<Vec<u8>>,
    accept: &'static str,
) -> Result<http::Response<Body>, kube::Error> {
    request
        .headers_mut()
        .insert(http::header::ACCEPT, http::HeaderValue::from_static(accept));
    let response = client.send(request.map(Body::from)).await?;
    let code = response.status();
    if !(code.is_client_error() || code.is_server_error()) {
        return Ok(response);
    }
    let protobuf = proto::is_protobuf(response.headers());
    let body = response.into_body().collect_bytes().await?;
    Err(kube::Error::Api(Box::new(error_status(
        code.as_u16(),
        protobuf,
        &body,
    ))))
}

/// The `Status` in an error answer's body; a body that is no Status (a proxy's text, say) becomes
/// one with the HTTP code, as kube does.
pub fn error_status(code: u16, protobuf: bool, body: &[u8]) -> Status {
    let decoded = if protobuf {
        proto::status_from_envelope(body).ok()
    } else {
        serde_json::from_slice::<Status>(body).ok()
    };
    decoded.unwrap_or_else(|| {
        Status::failure(
            String::from_utf8_lossy(body).trim(),
            "Failed to parse error data",
        )
        .with_code(code)
    })
}

/// The body as a reader that yields bytes as they arrive.
pub fn body_reader(response: http::Response<Body>) -> impl AsyncBufRead + Send + Unpin + use<> {
    response
        .into_body()
        .into_data_stream()
        .map_err(std::io::Error::other)
        .into_async_read()
}
