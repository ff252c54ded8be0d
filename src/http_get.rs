//! A minimal HTTP/1.0 GET for the CLI subcommands that ask the running service (`sweeper graph`).
//! Plain http on the service's own port only; no client crate needed for that.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Debug, thiserror::Error)]
pub enum GetError {
    #[error("{0}: only http://host:port URLs are supported")]
    BadUrl(String),
    #[error("cannot reach {url}: {source} (is `sweeper run` serving there? see --server)")]
    Io { url: String, source: std::io::Error },
    #[error("{url}: malformed HTTP response")]
    Malformed { url: String },
}

/// Percent-encodes a query value.
pub fn encode(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// GETs `url`, returning the status code and body.
pub async fn get(url: &str) -> Result<(u16, String), GetError> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| GetError::BadUrl(url.to_string()))?;
    let (host, path) = match rest.split_once('/') {
        Some((h, p)) => (h, format!("/{p}")),
        None => (rest, "/".to_string()),
    };
    let io = |source| GetError::Io {
        url: url.to_string(),
        source,
    };
    let mut s = tokio::net::TcpStream::connect(host).await.map_err(io)?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
        .await
        .map_err(io)?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.map_err(io)?;
    let text = String::from_utf8_lossy(&buf);
    let malformed = || GetError::Malformed {
        url: url.to_string(),
    };
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(malformed)?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(malformed)?;
    Ok((status, body.to_string()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn encodes_reserved_characters() {
        assert_eq!(
            super::encode("apps/v1/Deployment"),
            "apps%2Fv1%2FDeployment"
        );
        assert_eq!(super::encode("a-b.c"), "a-b.c");
    }
}
