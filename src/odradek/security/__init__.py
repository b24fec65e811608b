"""Who a client is and what it may do: TLS, SASL authentication, principals, ACLs.

Sans-I/O like ``protocol`` and ``log``: the asyncio shell in ``server`` feeds these modules
the bytes and certificates it receives and acts on their answers.
"""
