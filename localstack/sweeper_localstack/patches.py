"""Corrections to LocalStack's bundled moto, where it refuses or misreports a call CAPA's own
controller makes (tests/capa_controller.rs runs CAPA v2.13.0 against LocalStack). Each is applied
once when LocalStack starts (hook `on_infra_start`) and changes moto only where it departs from
AWS; docs/CONTRIBUTING.md ("LocalStack facts") lists them with the call and why.
"""

from localstack.runtime import hooks

# The protocols whose rules carry a port range (ICMP's "ports" are its type and code). AWS
# ignores FromPort/ToPort for every other protocol and omits them from DescribeSecurityGroups.
_PORTED = {"tcp", "6", "udp", "17", "icmp", "1", "icmpv6", "58", "-1", "all"}


def _patch_portless_rules() -> None:
    """AuthorizeSecurityGroupIngress/Egress with a protocol such as "4" (IP-in-IP, CAPA's calico
    rule) or "50" (ESP) and no FromPort/ToPort, as AWS takes it: moto does int(None) and answers
    500, after having added the request's earlier rules, so the SDK's retry then meets
    InvalidPermission.Duplicate forever. Such a rule gets no ports, as moto already does for "-1".
    """
    from moto.ec2.models import security_groups

    rule = security_groups.SecurityGroupRule
    original = rule.__init__

    def __init__(self, ec2_backend, ip_protocol, group_id, from_port, to_port, *args, **kwargs):
        portless = ip_protocol and str(ip_protocol).lower() not in _PORTED
        if portless and from_port is None and to_port is None:
            original(self, ec2_backend, "-1", group_id, None, None, *args, **kwargs)
            self.ip_protocol = str(ip_protocol)
            return
        original(self, ec2_backend, ip_protocol, group_id, from_port, to_port, *args, **kwargs)

    rule.__init__ = __init__


def _patch_target_groups_of_a_new_load_balancer() -> None:
    """DescribeTargetGroups by LoadBalancerArn of a load balancer that has none yet (CAPA asks
    right after CreateLoadBalancer, to find which of its listeners' groups exist): AWS answers
    an empty list, moto TargetGroupNotFound, on which CAPA's reconcile fails every time.
    """
    from moto.elbv2.exceptions import TargetGroupNotFoundError
    from moto.elbv2.models import ELBv2Backend

    original = ELBv2Backend.describe_target_groups

    def describe_target_groups(self, load_balancer_arn, target_group_arns, names):
        try:
            return original(self, load_balancer_arn, target_group_arns, names)
        except TargetGroupNotFoundError:
            if load_balancer_arn and not target_group_arns and not names:
                return []
            raise

    ELBv2Backend.describe_target_groups = describe_target_groups


def _patch_nat_gateway_delete_removes_its_interface() -> None:
    """DeleteNatGateway: AWS deletes the gateway's network interface with it (its Elastic IP
    stays allocated, disassociated); moto marks the gateway `deleted` and keeps the interface,
    still holding the address, so an account's inventory after a teardown lists an ENI that AWS
    would not (seen after CAPA's and sweeper's NAT deletes alike).
    """
    from moto.ec2.models.nat_gateways import NatGatewayBackend

    original = NatGatewayBackend.delete_nat_gateway

    def delete_nat_gateway(self, nat_gateway_id):
        gateway = original(self, nat_gateway_id)
        eni = getattr(gateway, "_eni", None)
        if eni is not None and eni.id in self.enis:
            for address in self.addresses:
                if address.eni is eni:
                    self.disassociate_address(address=address.public_ip)
            self.enis.pop(eni.id, None)
        return gateway

    NatGatewayBackend.delete_nat_gateway = delete_nat_gateway


def _patch_vpc_delete_removes_its_default_acl() -> None:
    """DeleteVpc: AWS deletes the VPC's default network ACL with it, as it does the main route
    table and the default security group (moto removes those two, not the ACL), so the ACL of a
    deleted VPC stays listed by DescribeNetworkAcls. Only the default ACL: a custom one is the
    user's and, on AWS, a dependency.
    """
    from moto.ec2.models.vpcs import VPCBackend

    original = VPCBackend.delete_vpc

    def delete_vpc(self, vpc_id):
        vpc = original(self, vpc_id)
        for acl_id, acl in list(self.network_acls.items()):
            if acl.vpc_id == vpc_id and acl.default:
                self.network_acls.pop(acl_id, None)
        return vpc

    VPCBackend.delete_vpc = delete_vpc


def _patch_classic_load_balancers_are_elasticloadbalancing() -> None:
    """GetResources with ResourceTypeFilters `elasticloadbalancing:loadbalancer` (or the service
    alone, `elasticloadbalancing`): AWS files classic load balancers there, as their ARN says
    (`arn:aws:elasticloadbalancing:<region>:<account>:loadbalancer/<name>`); moto returns only v2
    load balancers for it and files classic ones under a type of its own, `elb`, which AWS does not
    know. Sweeper's phase 1 asks for the two load-balancing types (services/src/locate/capa_tagged.rs),
    and CAPA's API-server load balancer is classic by default. The filter then also asks moto for
    its `elb:loadbalancer`; every other filter is passed as it came.
    """
    from moto.resourcegroupstaggingapi.models import ResourceGroupsTaggingAPIBackend

    original = ResourceGroupsTaggingAPIBackend._get_resources_generator
    asks = {"elasticloadbalancing", "elasticloadbalancing:loadbalancer"}

    def _get_resources_generator(self, tag_filters=None, resource_type_filters=None):
        if resource_type_filters and asks & set(resource_type_filters):
            if "elb:loadbalancer" not in resource_type_filters and "elb" not in resource_type_filters:
                resource_type_filters = [*resource_type_filters, "elb:loadbalancer"]
        return original(self, tag_filters=tag_filters, resource_type_filters=resource_type_filters)

    ResourceGroupsTaggingAPIBackend._get_resources_generator = _get_resources_generator


@hooks.on_infra_start()
def sweeper_moto_patches() -> None:
    _patch_portless_rules()
    _patch_target_groups_of_a_new_load_balancer()
    _patch_nat_gateway_delete_removes_its_interface()
    _patch_vpc_delete_removes_its_default_acl()
    _patch_classic_load_balancers_are_elasticloadbalancing()
