"""Fixtures of the conformance suite: clients for the simulated API server named by the kubeconfig
in DRA_SIM_KUBECONFIG, and a namespace of its own for each test."""

import os
import uuid

import pytest
from kubernetes import client, config


@pytest.fixture(scope="session")
def api_client():
    path = os.environ.get("DRA_SIM_KUBECONFIG")
    if not path:
        pytest.fail("DRA_SIM_KUBECONFIG names the kubeconfig of the simulator under test")
    config.load_kube_config(config_file=path)
    return client.ApiClient()


@pytest.fixture(scope="session")
def core(api_client):
    return client.CoreV1Api(api_client)


@pytest.fixture(scope="session")
def resource(api_client):
    return client.ResourceV1alpha2Api(api_client)


@pytest.fixture(scope="session")
def custom(api_client):
    return client.CustomObjectsApi(api_client)


@pytest.fixture
def ns(core):
    """A fresh namespace for one test."""
    name = "t-" + uuid.uuid4().hex[:10]
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    return name


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"
