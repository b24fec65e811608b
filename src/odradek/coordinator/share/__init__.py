"""Share groups (KIP-932, queues for Kafka): records of a topic partition shared by a group's
members one by one, each acknowledged on its own and delivered again when it was not.

Modules, from the bottom: ``state_records`` (the records of ``__share_group_state``, which
partition holds a share-partition, and how snapshots and updates combine) and ``partition``
(a share-partition's in-flight records and their state machine). Neither does I/O.
"""
