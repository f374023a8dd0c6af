"""The messages kafka-python lacks, checked byte for byte against Kafka 4.4.0's own serialization.

The ``GOLDEN`` hex strings were produced by the Kafka 4.4.0 Java classes
(``org.apache.kafka.common.message.*Data`` + ``MessageUtil.toByteBufferAccessor(message, version)``,
message bodies without the request/response header) for the values spelled out beside each test.
Topic ids: ``T1`` = ...0001, ``T2`` = ...0002.
"""
from __future__ import annotations

import uuid
from types import SimpleNamespace as NS

import pytest

from spark_purge.kafka import messages as m

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)

GOLDEN = {
    # groups: a (topics null), b (topics: t [0, 1])
    "DSGO_REQ_V1": "03026100000262020274030000000000000001000000",
    # sq: orders(T1) p0 start 10 epoch 3 lag 90; p1 start -1 epoch 3 lag -1;
    #     p2 start -1 epoch -1 error 29 "denied"; gone: error 69 "Group gone not found."
    "DSGO_RESP_V0": "000000000303737102076f7264657273000000000000000000000000000000010400000000000000000000000a0000000300"
    "00000000000001ffffffffffffffff000000030000000000000002ffffffffffffffffffffffff001d0764656e6965640000000000"
    "0005676f6e650100451647726f757020676f6e65206e6f7420666f756e642e0000",
    "DSGO_RESP_V1": "000000000303737102076f7264657273000000000000000000000000000000010400000000000000000000000a0000000300"
    "0000000000005a0000000000000001ffffffffffffffff00000003ffffffffffffffff0000000000000002ffffffffffffffffffff"
    "ffffffffffffffffffff001d0764656e69656400000000000005676f6e650100451647726f757020676f6e65206e6f7420666f756e64"
    "2e0000",
    # group ids sq, sq2; include_authorized_operations false
    "SGD_REQ_V1": "03037371047371320000",
    # sq Stable epoch 5/5 simple: m1 -> orders(T1) [0, 1]; m2 -> T2 (no name) [7];
    # sq2: error 16 "not coordinator"
    "SGD_RESP_V1": "000000000300000003737107537461626c6500000005000000050773696d706c6503036d3100000000050363310b2f313237"
    "2e302e302e3102076f72646572730200000000000000000000000000000001076f7264657273030000000000000001000000036d3200"
    "000000050363320b2f3132372e302e302e3102076f7264657273020000000000000000000000000000000201020000000700000080"
    "000000000010106e6f7420636f6f7264696e61746f72047371320100000000000000000101800000000000",
    "CGD_REQ_V1": "02026b0000",
    # k Reconciling epoch 7/7 uniform: m1 (type 1) assignment events(T1) [0], target events(T1) [0, 1]
    "CGD_RESP_V0": "0000000002000000026b0c5265636f6e63696c696e67000000070000000708756e69666f726d02036d31000000000006026303"
    "2f6802076576656e7473000200000000000000000000000000000001076576656e74730200000000000002000000000000000000000000"
    "00000001076576656e7473030000000000000001000000800000000000",
    "CGD_RESP_V1": "0000000002000000026b0c5265636f6e63696c696e67000000070000000708756e69666f726d02036d31000000000006026303"
    "2f6802076576656e7473000200000000000000000000000000000001076576656e74730200000000000002000000000000000000000000"
    "00000001076576656e747303000000000000000100000100800000000000",
    # group ids app, bad; include_authorized_operations false
    "STGD_REQ_V0": "0304617070046261640000",
    # app Stable epoch 4/4, topology epoch 1: subtopology 0 reads clicks (sinks to app-rep);
    #   subtopology 1 reads repartition topic app-rep (3 partitions) and has a changelog.
    #   m1 (endpoint h:8080, tag k=v): active 0:[0, 1], standby 1:[0]; target active 0:[0, 1], 1:[2].
    # uninit NotReady, topology null: m2 active 0:[0].  bad: error 69 "gone".
    "STGD_RESP_V0": "00000000040000000461707007537461626c65000000040000000401000000010302300207636c69636b7302086170702d"
    "7265700101000231010102146170702d73746f72652d6368616e67656c6f67000000000001010002086170702d7265700000000300"
    "01020f636c65616e75702e706f6c6963790764656c6574650000000002036d310000000400000363310b2f3132372e302e302e3100"
    "0000010370310102681f900002026b0276000202300000000000000000000000050001020230030000000000000001000202310200"
    "0000000001000302300300000000000000010002310200000002000101000000800000000000000007756e696e6974094e6f745265"
    "6164790000000100000001ff02036d320000000100000363320b2f3132372e302e302e3100000000037032ff010101020230020000"
    "0000000101000101010000008000000000004505676f6e6504626164010000000000000000ff01800000000000",
    # orders [2, 0], t [1]
    "DP_REQ_V0": "03076f726465727303000000000000000200027402000000010000",
    # orders p0: producer 1000 epoch 3 seq 9 last 1700000000000 coordinator epoch 2, txn open at 40;
    #            producer 1001 epoch 0 seq 4 last 1700000001000, no txn (coordinator epoch -1, -1);
    #        p2: error 6 "not leader"
    "DP_RESP_V0": "0000000002076f726465727303000000000000000300000000000003e800000003000000090000018bcfe568000000000200"
    "000000000000280000000000000003e900000000000000040000018bcfe56be8ffffffffffffffffffffffff00000000000200060b6e"
    "6f74206c656164657201000000",
    "LG_REQ_V5": "010309636f6e73756d657206736861726500",
    # sq share/Empty/share, k consumer/Stable/consumer
    "LG_RESP_V5": "0000000000000303737106736861726506456d70747906736861726500026b09636f6e73756d657207537461626c6509636f6e"
    "73756d65720000",
}


def golden(name: str) -> bytes:
    return bytes.fromhex(GOLDEN[name])


def reencode(decoded: object, version: int) -> bytes:
    """Encode a decoded response again (kafka-python's decoder leaves no header slot set)."""
    decoded._header = None  # type: ignore[attr-defined]
    return decoded.encode(version=version)  # type: ignore[attr-defined, no-any-return]


# ---- requests ------------------------------------------------------------------------------------


def test_describe_share_group_offsets_request_matches_kafka() -> None:
    Req = m.DescribeShareGroupOffsetsRequest
    _Group = Req.DescribeShareGroupOffsetsRequestGroup
    _Topic = _Group.DescribeShareGroupOffsetsRequestTopic
    request = Req(
        groups=[
            _Group(group_id="a", topics=None),
            _Group(group_id="b", topics=[_Topic(topic_name="t", partitions=[0, 1])]),
        ]
    )
    assert request.encode(version=1) == golden("DSGO_REQ_V1")
    assert request.encode(version=0) == golden("DSGO_REQ_V1")  # v1 changed only the response


def test_build_describe_share_group_offsets_all_partitions_or_given_ones() -> None:
    every = m.build_describe_share_group_offsets(["b", "a", "a"])
    assert [(g.group_id, g.topics) for g in every.groups] == [("a", None), ("b", None)]
    assert every.API_KEY == 90
    assert every.encode(version=1) == bytes.fromhex("03026100000262000000")

    given = m.build_describe_share_group_offsets(["b"], {"t": [1, 0, 1]})
    # group b of the golden request: topic t, partitions [0, 1] (sorted, deduplicated)
    assert given.encode(version=1) == bytes.fromhex("02" + GOLDEN["DSGO_REQ_V1"][10:])


def test_describe_requests_match_kafka() -> None:
    assert m.build_share_group_describe(["sq2", "sq"]).encode(version=1) == golden("SGD_REQ_V1")
    assert m.build_consumer_group_describe(["k"]).encode(version=1) == golden("CGD_REQ_V1")
    assert m.build_consumer_group_describe(["k"]).encode(version=0) == golden("CGD_REQ_V1")
    assert m.build_streams_group_describe(["bad", "app"]).encode(version=0) == golden("STGD_REQ_V0")


def test_describe_producers_request_matches_kafka() -> None:
    request = m.build_describe_producers([("t", 1), ("orders", 2), ("orders", 0), ("orders", 2)])
    assert request.API_KEY == 61 and (request._min_version, request._max_version) == (0, 0)
    assert request.encode(version=0) == golden("DP_REQ_V0")


def test_parse_describe_producers_names_open_transactions_and_errors() -> None:
    response = m.DescribeProducersResponse.decode(golden("DP_RESP_V0"), version=0)
    assert reencode(response, 0) == golden("DP_RESP_V0")
    parsed = m.parse_describe_producers(response)
    p0, p2 = parsed[("orders", 0)], parsed[("orders", 2)]
    assert [(s.producer_id, s.producer_epoch, s.last_timestamp, s.txn_start_offset) for s in p0.producers] == [
        (1000, 3, 1_700_000_000_000, 40), (1001, 0, 1_700_000_001_000, None)
    ]
    assert [s.producer_id for s in p0.open_transactions] == [1000] and p0.error is None
    assert (p2.producers, p2.error, p2.error_message) == ((), "NOT_LEADER_OR_FOLLOWER", "not leader")


def test_list_groups_types_filter_matches_kafka() -> None:
    request = m.build_list_groups(types=["share", "consumer"])
    assert request.encode(version=5) == golden("LG_REQ_V5")


def test_builders_pin_the_versions_a_4_4_broker_speaks() -> None:
    assert (m.build_describe_share_group_offsets(["g"])._min_version, m.build_describe_share_group_offsets(["g"])._max_version) == (0, 1)
    assert (m.build_share_group_describe(["g"])._min_version, m.build_share_group_describe(["g"])._max_version) == (1, 1)
    assert (m.build_consumer_group_describe(["g"])._min_version, m.build_consumer_group_describe(["g"])._max_version) == (0, 1)
    assert (m.build_streams_group_describe(["g"])._min_version, m.build_streams_group_describe(["g"])._max_version) == (0, 0)
    assert m.build_list_groups()._min_version == 5


# ---- responses -----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
def test_parse_describe_share_group_offsets(version: int) -> None:
    response = m.DescribeShareGroupOffsetsResponse.decode(golden(f"DSGO_RESP_V{version}"), version=version)
    parsed = m.parse_describe_share_group_offsets(response)
    assert set(parsed) == {"sq", "gone"}

    sq = parsed["sq"]
    assert sq.error is None
    assert [(p.topic, p.partition, p.start_offset, p.leader_epoch, p.error) for p in sq.partitions] == [
        ("orders", 0, 10, 3, None),
        ("orders", 1, None, 3, None),  # -1: no position
        ("orders", 2, None, -1, "TOPIC_AUTHORIZATION_FAILED"),
    ]
    assert [p.lag for p in sq.partitions] == ([90, None, None] if version == 1 else [None, None, None])
    assert sq.partitions[0].topic_id == T1
    assert sq.partitions[2].error_message == "denied"
    assert sq.positions() == {("orders", 0): 10}
    assert sq.without_position() == {("orders", 1)}
    assert sq.partition_errors() == {("orders", 2): "TOPIC_AUTHORIZATION_FAILED"}

    gone = parsed["gone"]
    assert (gone.error, gone.error_message, gone.partitions) == ("GROUP_ID_NOT_FOUND", "Group gone not found.", ())
    assert gone.positions() == {}


@pytest.mark.parametrize("version", [0, 1])
def test_describe_share_group_offsets_response_built_by_hand_matches_kafka(version: int) -> None:
    R = m.DescribeShareGroupOffsetsResponse
    _Group = R.DescribeShareGroupOffsetsResponseGroup
    _Topic = _Group.DescribeShareGroupOffsetsResponseTopic
    _Part = _Topic.DescribeShareGroupOffsetsResponsePartition
    response = R(
        throttle_time_ms=0,
        groups=[
            _Group(
                group_id="sq",
                topics=[
                    _Topic(
                        topic_name="orders",
                        topic_id=T1,
                        partitions=[
                            _Part(partition_index=0, start_offset=10, leader_epoch=3, lag=90, error_code=0, error_message=None),
                            _Part(partition_index=1, start_offset=-1, leader_epoch=3, lag=-1, error_code=0, error_message=None),
                            _Part(partition_index=2, start_offset=-1, leader_epoch=-1, lag=-1, error_code=29, error_message="denied"),
                        ],
                    )
                ],
                error_code=0,
                error_message=None,
            ),
            _Group(group_id="gone", topics=[], error_code=69, error_message="Group gone not found."),
        ],
    )
    encoded = response.encode(version=version)
    assert encoded == golden(f"DSGO_RESP_V{version}")
    again = m.parse_describe_share_group_offsets(R.decode(encoded, version=version))
    assert again["sq"].positions() == {("orders", 0): 10}
    assert reencode(R.decode(encoded, version=version), version) == encoded


def test_parse_share_group_describe_maps_topic_ids() -> None:
    response = m.ShareGroupDescribeResponse.decode(golden("SGD_RESP_V1"), version=1)
    assert reencode(m.ShareGroupDescribeResponse.decode(golden("SGD_RESP_V1"), version=1), 1) == golden("SGD_RESP_V1")

    # T2 has no name in the answer and none in the mapping: reported, not guessed.
    parsed = m.parse_share_group_describe(response, {T1: "orders"})
    sq = parsed["sq"]
    assert (sq.group_type, sq.state, sq.member_count, sq.group_epoch, sq.assignment_epoch) == ("share", "Stable", 2, 5, 5)
    assert sq.assigned == {("orders", 0), ("orders", 1)}
    assert sq.held == sq.assigned
    assert sq.unresolved_topic_ids == {T2}
    assert sq.subscribed_topics == {"orders"}
    assert parsed["sq2"].error == "NOT_COORDINATOR"
    assert parsed["sq2"].error_message == "not coordinator"

    # With Metadata's mapping the id is named, and the mapping wins over the broker's name.
    named = m.parse_share_group_describe(response, {T1: "orders-renamed", T2: "payments"})["sq"]
    assert named.assigned == {("orders-renamed", 0), ("orders-renamed", 1), ("payments", 7)}
    assert named.unresolved_topic_ids == frozenset()


@pytest.mark.parametrize("version", [0, 1])
def test_parse_consumer_group_describe(version: int) -> None:
    response = m.ConsumerGroupDescribeResponse.decode(golden(f"CGD_RESP_V{version}"), version=version)
    assert reencode(m.ConsumerGroupDescribeResponse.decode(golden(f"CGD_RESP_V{version}"), version=version), version) == golden(
        f"CGD_RESP_V{version}"
    )
    (member,) = response.groups[0].members
    assert member.member_type == (1 if version == 1 else -1)

    k = m.parse_consumer_group_describe(response, {})["k"]
    assert (k.group_type, k.state, k.member_count) == ("consumer", "Reconciling", 1)
    assert k.assigned == {("events", 0)}
    assert k.target_assigned == {("events", 0), ("events", 1)}
    assert k.held == {("events", 0), ("events", 1)}  # the partition on its way to m1 is held too


def test_parse_streams_group_describe_maps_active_tasks_to_source_partitions() -> None:
    response = m.StreamsGroupDescribeResponse.decode(golden("STGD_RESP_V0"), version=0)
    assert reencode(m.StreamsGroupDescribeResponse.decode(golden("STGD_RESP_V0"), version=0), 0) == golden("STGD_RESP_V0")
    parsed = m.parse_streams_group_describe(response)

    app = parsed["app"]
    assert (app.group_type, app.state, app.member_count, app.error) == ("streams", "Stable", 1, None)
    assert app.assigned == {("clicks", 0), ("clicks", 1)}  # the standby task 1:[0] reads no source topic
    assert app.target_assigned == {("clicks", 0), ("clicks", 1), ("app-rep", 2)}  # task 1:2 reads app-rep
    assert app.held == {("clicks", 0), ("clicks", 1), ("app-rep", 2)}
    assert app.subscribed_topics == {"clicks", "app-rep"}

    uninit = parsed["uninit"]  # tasks it cannot map must not read as "holds nothing"
    assert (uninit.error, uninit.held) == ("UNKNOWN_SUBTOPOLOGY", frozenset())
    assert uninit.error_message == "active tasks of subtopologies ['0'] the group's topology does not list"

    bad = parsed["bad"]
    assert (bad.error, bad.error_message, bad.member_count) == ("GROUP_ID_NOT_FOUND", "gone", 0)


def test_parse_list_groups() -> None:
    from kafka.protocol.admin import ListGroupsResponse  # kafka-python's own: v5 has GroupType

    listed = m.parse_list_groups(ListGroupsResponse.decode(golden("LG_RESP_V5"), version=5))
    assert listed.error is None
    assert [(g.group_id, g.group_type, g.state, g.protocol_type) for g in listed.groups] == [
        ("k", "consumer", "Stable", "consumer"),
        ("sq", "share", "Empty", "share"),
    ]
    assert listed.of_type("share") == ["sq"]
    assert listed.of_type("consumer") == ["k"]


def test_error_names() -> None:
    assert m.error_name(0) is None
    assert m.error_name(16) == "NOT_COORDINATOR"
    assert m.error_name(69) == "GROUP_ID_NOT_FOUND"
    assert m.error_name(6) == "NOT_LEADER_OR_FOLLOWER"


def test_responses_register_for_decoding() -> None:
    from kafka.protocol.api_header import ResponseClassRegistry

    registry = ResponseClassRegistry._response_class_registry
    for key, cls in {
        90: m.DescribeShareGroupOffsetsResponse,
        77: m.ShareGroupDescribeResponse,
        69: m.ConsumerGroupDescribeResponse,
        89: m.StreamsGroupDescribeResponse,
    }.items():
        assert registry[key].name == cls.name


# ConsumerProtocol.serializeAssignment(orders-0, orders-2, events-1) by the Kafka 4.4.0 Java client
JAVA_ASSIGNMENT = bytes.fromhex(
    "00030000000200066f726465727300000002000000000000000200066576656e74730000000100000001ffffffff"
)


def test_parse_classic_group_assignments() -> None:
    def member(member_id: str, assignment: bytes) -> NS:
        return NS(member_id=member_id, member_assignment=assignment)

    response = NS(
        groups=[
            NS(group_id="c", error_code=0, group_state="Stable", protocol_type="consumer",
               members=[member("m1", JAVA_ASSIGNMENT), member("m2", b"")]),
            NS(group_id="rebalancing", error_code=0, group_state="PreparingRebalance", protocol_type="consumer",
               members=[member("m1", b"")]),
            NS(group_id="connect", error_code=0, group_state="Stable", protocol_type="connect",
               members=[member("w1", b"\x00\x01garbage")]),
            NS(group_id="bad", error_code=0, group_state="Stable", protocol_type="consumer",
               members=[member("m1", b"\x00\x00\x00")]),
            NS(group_id="denied", error_code=30, group_state="", protocol_type="", members=[]),
        ]
    )
    parsed = m.parse_classic_group_assignments(response)
    c = parsed["c"]
    assert (c.group_type, c.state, c.member_count, c.error) == ("classic", "Stable", 2, None)
    assert c.assigned == {("orders", 0), ("orders", 2), ("events", 1)}
    # In a rebalance the broker shows no subscription: what m1 is about to read is unknown.
    assert parsed["rebalancing"].assigned == frozenset() and parsed["rebalancing"].error == "REBALANCE_IN_PROGRESS"
    assert parsed["connect"].assigned == frozenset() and parsed["connect"].error is None
    assert parsed["bad"].error == "MALFORMED_ASSIGNMENT"
    assert parsed["denied"].error == "GROUP_AUTHORIZATION_FAILED"
