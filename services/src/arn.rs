//! ARN parsing. Cleaners decide what a resource is from its parsed service and resource type,
//! never from the shape of the string alone.

use std::fmt;
use std::str::FromStr;

/// `arn:partition:service:region:account-id:resource`, with `resource` split into a type and an id
/// where the service uses `type/id` or `type:id`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Arn {
    pub partition: String,
    pub service: String,
    pub region: String,
    pub account: String,
    /// Everything after the fifth colon, as given.
    pub resource: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArnError {
    #[error("malformed ARN {arn:?}: {reason}")]
    Malformed { arn: String, reason: &'static str },
}

impl FromStr for Arn {
    type Err = ArnError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |reason| ArnError::Malformed {
            arn: s.to_string(),
            reason,
        };
        let mut parts = s.splitn(6, ':');
        if parts.next() != Some("arn") {
            return Err(bad("does not start with \"arn:\""));
        }
        let partition = parts.next().ok_or_else(|| bad("no partition"))?;
        let service = parts.next().ok_or_else(|| bad("no service"))?;
        let region = parts.next().ok_or_else(|| bad("no region"))?;
        let account = parts.next().ok_or_else(|| bad("no account"))?;
        let resource = parts.next().ok_or_else(|| bad("no resource"))?;
        if partition.is_empty() {
            return Err(bad("empty partition"));
        }
        if service.is_empty() {
            return Err(bad("empty service"));
        }
        if resource.is_empty() {
            return Err(bad("empty resource"));
        }
        Ok(Arn {
            partition: partition.into(),
            service: service.into(),
            region: region.into(),
            account: account.into(),
            resource: resource.into(),
        })
    }
}

impl Arn {
    /// The resource type: the part of `resource` before the first `/` or `:` (e.g.
    /// `loadbalancer`, `targetgroup`, `security-group`). Empty when the resource has no type.
    pub fn resource_type(&self) -> &str {
        match self.resource.find(['/', ':']) {
            Some(i) => &self.resource[..i],
            None => "",
        }
    }

    /// The part of `resource` after the type separator (the whole resource when untyped).
    pub fn resource_id(&self) -> &str {
        match self.resource.find(['/', ':']) {
            Some(i) => &self.resource[i + 1..],
            None => &self.resource,
        }
    }
}

impl fmt::Display for Arn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "arn:{}:{}:{}:{}:{}",
            self.partition, self.service, self.region, self.account, self.resource
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_v2_load_balancer() {
        let s = "arn:aws:elasticloadbalancing:us-east-1:000000000000:loadbalancer/net/nlb-1/50dc6c495c0c9188";
        let a: Arn = s.parse().unwrap();
        assert_eq!(a.service, "elasticloadbalancing");
        assert_eq!(a.resource_type(), "loadbalancer");
        assert_eq!(a.resource_id(), "net/nlb-1/50dc6c495c0c9188");
        assert_eq!(a.to_string(), s);
    }

    #[test]
    fn parses_an_ec2_security_group() {
        let a: Arn = "arn:aws:ec2:us-east-1:000000000000:security-group/sg-0123"
            .parse()
            .unwrap();
        assert_eq!(
            (a.service.as_str(), a.resource_type(), a.resource_id()),
            ("ec2", "security-group", "sg-0123")
        );
    }

    #[test]
    fn keeps_colons_inside_the_resource() {
        let a: Arn = "arn:aws:logs:us-east-1:1:log-group:/aws/eks/c1:*"
            .parse()
            .unwrap();
        assert_eq!(a.resource_type(), "log-group");
        assert_eq!(a.resource_id(), "/aws/eks/c1:*");
    }

    #[test]
    fn rejects_malformed_arns_without_panicking() {
        for bad in [
            "",
            "arn",
            "arn:aws",
            "arn:aws:ec2:us-east-1:1",
            "arn::ec2:r:1:x",
            "arn:aws::r:1:x",
            "arn:aws:ec2:r:1:",
            "nra:aws:ec2:r:1:x",
        ] {
            let err = bad.parse::<Arn>().unwrap_err();
            assert!(err.to_string().contains("malformed ARN"), "{bad}: {err}");
        }
    }
}
