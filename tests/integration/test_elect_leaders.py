"""ElectLeaders on a single broker, through confluent-kafka's AdminClient: the broker leads
every partition it hosts, so no election is ever needed, and an unknown partition says so."""

from __future__ import annotations

from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka._model import ElectionType


def test_a_single_broker_needs_no_election(odradek_broker):
    admin = AdminClient({"bootstrap.servers": odradek_broker.bootstrap_servers})
    admin.create_topics([NewTopic("elect", 2, 1)])["elect"].result(10)
    for election_type in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        results = admin.elect_leaders(election_type, [
            TopicPartition("elect", 0), TopicPartition("elect", 1),
            TopicPartition("elect", 7)]).result(10)
        codes = {tp.partition: error.code() for tp, error in results.items()}
        assert codes == {0: KafkaError.ELECTION_NOT_NEEDED, 1: KafkaError.ELECTION_NOT_NEEDED,
                         7: KafkaError.UNKNOWN_TOPIC_OR_PART}
