//! The price table the scan estimates a leak's monthly cost from, and the cost model. Pure.
//!
//! **Source and date.** On-demand list prices from AWS's public pricing pages (Amazon VPC
//! pricing for NAT gateways, public IPv4 addresses and interface endpoints; Elastic Load Balancing
//! pricing; Amazon EBS pricing for volumes and standard snapshots), as published and taken as of
//! [`PRICES_AS_OF`]. They were written down without network access to the pages, from the list
//! prices as published then: **check them against the pages before relying on an estimate**, and
//! update this table (and its date) when AWS changes them. A region or kind not in the table is
//! shown as unknown, never as zero.
//!
//! **Model.** Hourly items cost `price × 730` hours a month (AWS's own monthly convention):
//! NAT gateways, load balancers, public IPv4 addresses (Elastic IPs), interface endpoints (per
//! Availability Zone, i.e. per subnet the endpoint is in). EBS volumes cost their provisioned
//! size × the GB-month price of their type (provisioned IOPS and throughput above the baseline
//! are not counted). Snapshots cost their source volume's size × the standard snapshot GB-month
//! price: an upper bound, since AWS bills the incremental blocks, which no listing reports.
//! Usage-based charges (data processed, LCUs) are not counted: an idle leak has none.
//! Kinds AWS does not charge for (security groups, subnets, route tables, VPCs, internet
//! gateways, target groups, detached network interfaces, launch templates) cost zero; everything
//! else (instances, for one) is unknown.

use serde::Serialize;

/// When the prices below were taken.
pub const PRICES_AS_OF: &str = "2025-01-15";
/// Where they were taken from.
pub const PRICES_SOURCE: &str = "AWS public pricing pages (aws.amazon.com/vpc/pricing, \
aws.amazon.com/elasticloadbalancing/pricing, aws.amazon.com/ebs/pricing), on-demand list \
prices; to be checked against the pages";

/// AWS's hours in a month.
pub const HOURS_PER_MONTH: f64 = 730.0;

/// One region's list prices, in US dollars. `None`: not known here.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RegionPrices {
    pub region: &'static str,
    pub nat_gateway_hour: Option<f64>,
    pub classic_lb_hour: Option<f64>,
    pub application_lb_hour: Option<f64>,
    pub network_lb_hour: Option<f64>,
    pub gateway_lb_hour: Option<f64>,
    pub public_ipv4_hour: Option<f64>,
    pub interface_endpoint_az_hour: Option<f64>,
    /// GB-month by volume type (`gp3`, `gp2`, `io1`, `io2`, `st1`, `sc1`, `standard`).
    pub ebs_gb_month: &'static [(&'static str, f64)],
    pub snapshot_gb_month: Option<f64>,
}

const US_EAST_1: RegionPrices = RegionPrices {
    region: "us-east-1",
    nat_gateway_hour: Some(0.045),
    classic_lb_hour: Some(0.025),
    application_lb_hour: Some(0.0225),
    network_lb_hour: Some(0.0225),
    gateway_lb_hour: Some(0.0125),
    public_ipv4_hour: Some(0.005),
    interface_endpoint_az_hour: Some(0.01),
    ebs_gb_month: &[
        ("gp3", 0.08),
        ("gp2", 0.10),
        ("io1", 0.125),
        ("io2", 0.125),
        ("st1", 0.045),
        ("sc1", 0.015),
        ("standard", 0.05),
    ],
    snapshot_gb_month: Some(0.05),
};

/// The table: regions not here are unknown throughout.
pub const PRICES: &[RegionPrices] = &[
    US_EAST_1,
    // us-east-2 and us-west-2 list the same prices as us-east-1 for these kinds.
    RegionPrices {
        region: "us-east-2",
        ..US_EAST_1
    },
    RegionPrices {
        region: "us-west-2",
        ..US_EAST_1
    },
    RegionPrices {
        region: "eu-west-1",
        nat_gateway_hour: Some(0.048),
        classic_lb_hour: Some(0.028),
        application_lb_hour: Some(0.0252),
        network_lb_hour: Some(0.0252),
        // Not known here with confidence: shown as unknown.
        gateway_lb_hour: None,
        public_ipv4_hour: Some(0.005),
        interface_endpoint_az_hour: Some(0.011),
        ebs_gb_month: &[
            ("gp3", 0.088),
            ("gp2", 0.11),
            ("io1", 0.138),
            ("io2", 0.138),
            ("st1", 0.05),
            ("sc1", 0.0168),
            ("standard", 0.055),
        ],
        snapshot_gb_month: Some(0.05),
    },
];

/// The table's prices for `region`, if it has them.
pub fn region_prices(region: &str) -> Option<&'static RegionPrices> {
    PRICES.iter().find(|p| p.region == region)
}

/// What the model needs to know of one resource beyond its ARN, from the describes the scan
/// makes for candidates' volumes, snapshots and endpoints.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Sizing {
    /// A volume's size, or a snapshot's source volume size, in GiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_gib: Option<i64>,
    /// A volume's type (`gp3`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume_type: Option<String>,
    /// An endpoint's type (`Interface`, `Gateway`, `GatewayLoadBalancer`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint_type: Option<String>,
    /// The subnets (one per Availability Zone) an interface endpoint is in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint_subnets: Option<usize>,
}

/// One resource's estimated monthly cost.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "cost", content = "dollars")]
pub enum MonthlyCost {
    /// AWS charges nothing for it while idle.
    Free,
    Dollars(f64),
    /// No price for it here: why.
    Unknown(String),
}

/// The report's kind of a resource: `service:type`, with a load balancer's flavour
/// (`elasticloadbalancing:loadbalancer/app`, `/net`, `/gwy`; a classic one has none).
pub fn kind_of(service: &str, resource: &str) -> String {
    let ty = resource.split(['/', ':']).next().unwrap_or(resource);
    if service == "elasticloadbalancing" && ty == "loadbalancer" {
        for flavour in ["app", "net", "gwy"] {
            if resource.starts_with(&format!("loadbalancer/{flavour}/")) {
                return format!("{service}:loadbalancer/{flavour}");
            }
        }
    }
    format!("{service}:{ty}")
}

/// Kinds AWS does not charge for while they sit idle.
const FREE: &[&str] = &[
    "ec2:security-group",
    "ec2:subnet",
    "ec2:route-table",
    "ec2:vpc",
    "ec2:internet-gateway",
    "ec2:network-interface",
    "ec2:launch-template",
    "ec2:network-acl",
    "ec2:dhcp-options",
    "ec2:key-pair",
    "elasticloadbalancing:targetgroup",
    // IAM bills nothing; a leaked profile or provider costs quota (1,000 and 100 an account).
    "iam:instance-profile",
    "iam:oidc-provider",
];

/// The monthly cost of one resource of `kind` (see [`kind_of`]) in `region` (see the module doc).
pub fn monthly(kind: &str, region: &str, sizing: &Sizing) -> MonthlyCost {
    if FREE.contains(&kind) {
        return MonthlyCost::Free;
    }
    let Some(p) = region_prices(region) else {
        return MonthlyCost::Unknown(format!("no prices for region {region} in the table"));
    };
    let hourly = |price: Option<f64>, what: &str| match price {
        Some(h) => MonthlyCost::Dollars(h * HOURS_PER_MONTH),
        None => MonthlyCost::Unknown(format!("no {what} price for {region} in the table")),
    };
    match kind {
        "ec2:natgateway" => hourly(p.nat_gateway_hour, "NAT gateway"),
        "ec2:elastic-ip" => hourly(p.public_ipv4_hour, "public IPv4"),
        "elasticloadbalancing:loadbalancer" => hourly(p.classic_lb_hour, "Classic Load Balancer"),
        "elasticloadbalancing:loadbalancer/app" => {
            hourly(p.application_lb_hour, "Application Load Balancer")
        }
        "elasticloadbalancing:loadbalancer/net" => {
            hourly(p.network_lb_hour, "Network Load Balancer")
        }
        "elasticloadbalancing:loadbalancer/gwy" => {
            hourly(p.gateway_lb_hour, "Gateway Load Balancer")
        }
        "ec2:vpc-endpoint" => match (sizing.endpoint_type.as_deref(), sizing.endpoint_subnets) {
            (Some("Gateway"), _) => MonthlyCost::Free,
            (Some("Interface"), Some(azs)) => match p.interface_endpoint_az_hour {
                Some(h) => MonthlyCost::Dollars(h * HOURS_PER_MONTH * azs.max(1) as f64),
                None => MonthlyCost::Unknown(format!(
                    "no interface endpoint price for {region} in the table"
                )),
            },
            _ => MonthlyCost::Unknown("endpoint type or subnets unknown".into()),
        },
        "ec2:volume" => match (sizing.volume_type.as_deref(), sizing.size_gib) {
            (Some(ty), Some(gib)) => match p.ebs_gb_month.iter().find(|(t, _)| *t == ty) {
                Some((_, gb)) => MonthlyCost::Dollars(gb * gib as f64),
                None => MonthlyCost::Unknown(format!("no {ty} volume price for {region}")),
            },
            _ => MonthlyCost::Unknown("volume size or type unknown".into()),
        },
        "ec2:snapshot" => match (p.snapshot_gb_month, sizing.size_gib) {
            (Some(gb), Some(gib)) => MonthlyCost::Dollars(gb * gib as f64),
            (None, _) => MonthlyCost::Unknown(format!("no snapshot price for {region}")),
            (_, None) => MonthlyCost::Unknown("snapshot size unknown".into()),
        },
        other => MonthlyCost::Unknown(format!("{other} is not in the price table")),
    }
}

/// A candidate's total: the known dollars, and how many resources' costs are unknown (a total
/// with unknowns is a lower bound, and says so).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CostTotal {
    pub dollars_per_month: f64,
    pub unknown: usize,
}

impl CostTotal {
    /// Adds another total to this one.
    pub fn sum(&mut self, other: &CostTotal) {
        self.dollars_per_month += other.dollars_per_month;
        self.unknown += other.unknown;
    }

    pub fn add(&mut self, c: &MonthlyCost) {
        match c {
            MonthlyCost::Free => {}
            MonthlyCost::Dollars(d) => self.dollars_per_month += d,
            MonthlyCost::Unknown(_) => self.unknown += 1,
        }
    }

    /// `$12.34/month`, or `≥ $12.34/month + 2 unknown`.
    pub fn describe(&self) -> String {
        if self.unknown == 0 {
            format!("${:.2}/month", self.dollars_per_month)
        } else {
            format!(
                ">= ${:.2}/month + {} unknown",
                self.dollars_per_month, self.unknown
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dollars(c: MonthlyCost) -> f64 {
        match c {
            MonthlyCost::Dollars(d) => d,
            other => panic!("not priced: {other:?}"),
        }
    }

    #[test]
    fn kinds_come_from_the_arn_resource_with_the_load_balancers_flavour() {
        assert_eq!(kind_of("ec2", "natgateway/nat-1"), "ec2:natgateway");
        assert_eq!(
            kind_of("elasticloadbalancing", "loadbalancer/app/a/1"),
            "elasticloadbalancing:loadbalancer/app"
        );
        assert_eq!(
            kind_of("elasticloadbalancing", "loadbalancer/net/a/1"),
            "elasticloadbalancing:loadbalancer/net"
        );
        assert_eq!(
            kind_of("elasticloadbalancing", "loadbalancer/classic-1"),
            "elasticloadbalancing:loadbalancer"
        );
        assert_eq!(
            kind_of("elasticloadbalancing", "targetgroup/tg/1"),
            "elasticloadbalancing:targetgroup"
        );
    }

    #[test]
    fn hourly_kinds_cost_730_hours_and_sized_kinds_their_size() {
        let none = Sizing::default();
        let near = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(near(
            dollars(monthly("ec2:natgateway", "us-east-1", &none)),
            32.85
        ));
        assert!(near(
            dollars(monthly("ec2:elastic-ip", "us-east-1", &none)),
            3.65
        ));
        assert!(near(
            dollars(monthly(
                "elasticloadbalancing:loadbalancer",
                "us-east-1",
                &none
            )),
            18.25
        ));
        let gp3 = Sizing {
            size_gib: Some(100),
            volume_type: Some("gp3".into()),
            ..Default::default()
        };
        assert!(near(dollars(monthly("ec2:volume", "us-east-1", &gp3)), 8.0));
        let endpoint = Sizing {
            endpoint_type: Some("Interface".into()),
            endpoint_subnets: Some(3),
            ..Default::default()
        };
        assert!(near(
            dollars(monthly("ec2:vpc-endpoint", "us-east-1", &endpoint)),
            21.9
        ));
        let snap = Sizing {
            size_gib: Some(10),
            ..Default::default()
        };
        assert!(near(
            dollars(monthly("ec2:snapshot", "eu-west-1", &snap)),
            0.5
        ));
    }

    #[test]
    fn unknown_prices_are_unknown_never_zero() {
        let none = Sizing::default();
        let unknown = |c| matches!(c, MonthlyCost::Unknown(_));
        assert!(unknown(monthly("ec2:natgateway", "ap-south-2", &none)));
        assert!(unknown(monthly("ec2:instance", "us-east-1", &none)));
        assert!(
            unknown(monthly("ec2:volume", "us-east-1", &none)),
            "size unknown"
        );
        assert!(unknown(monthly(
            "elasticloadbalancing:loadbalancer/gwy",
            "eu-west-1",
            &none
        )));
        assert_eq!(
            monthly("ec2:security-group", "ap-south-2", &none),
            MonthlyCost::Free
        );
        let gateway = Sizing {
            endpoint_type: Some("Gateway".into()),
            ..Default::default()
        };
        assert_eq!(
            monthly("ec2:vpc-endpoint", "us-east-1", &gateway),
            MonthlyCost::Free
        );
        let mut t = CostTotal::default();
        t.add(&MonthlyCost::Dollars(3.65));
        t.add(&MonthlyCost::Unknown("x".into()));
        t.add(&MonthlyCost::Free);
        assert_eq!(t.describe(), ">= $3.65/month + 1 unknown");
    }
}
