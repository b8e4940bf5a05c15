"""The broker's security: who a client is and what it may do (`acl.py`: the ACL authorizer's decisions)."""
