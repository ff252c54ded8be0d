"""elb, elbv2 and eks providers for LocalStack's open-source build.

LocalStack 4.x ships moto's elb/elbv2/eks backends but registers no provider for them (its eks
is a Pro feature). These providers
declare every operation of the service and hand each request to moto unchanged, so classic and v2
load balancers, listeners and target groups work, and the tagging API (also moto) returns their
ARNs; eks answers ListClusters/DescribeCluster, which `sweeper scan` and `sweeper teardown` ask
to tell a live EKS cluster from an orphan. Nothing here emulates behaviour of its own.
"""

from localstack.services.plugins import Service, aws_provider


def _moto_service(name: str) -> Service:
    from localstack.aws.spec import load_service
    from localstack.services.moto import call_moto

    model = load_service(name)

    def to_moto(context, _request):
        return call_moto(context)

    table = {operation: to_moto for operation in model.operation_names}

    class _Provider:
        service = name

    return Service.for_provider(_Provider(), dispatch_table_factory=lambda _provider: table)


@aws_provider(api="elb")
def elb() -> Service:
    return _moto_service("elb")


@aws_provider(api="elbv2")
def elbv2() -> Service:
    return _moto_service("elbv2")


@aws_provider(api="eks")
def eks() -> Service:
    return _moto_service("eks")
