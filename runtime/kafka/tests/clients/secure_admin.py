"""A real client's admin API managing users and ACLs on a secured isr cluster, logged in as a
super user from a librdkafka-format properties file (what `isr cluster --security` writes).

Usage: secure_admin.py CLIENT PROPERTIES USER TOPIC
  CLIENT: confluent | kafka-python
With AlterUserScramCredentials it gives USER a SCRAM-SHA-512 password, checks it with
DescribeUserScramCredentials, allows USER to write TOPIC (an existing topic) with CreateAcls,
finds those ACLs with DescribeAcls, and has secure_client.py produce to TOPIC as USER; then it
deletes the ACLs (DeleteAcls: USER is refused the topic) and the user (USER cannot log in).
Prints "OK" and exits 0 when every step went as expected; raises otherwise.
"""
import os
import subprocess
import sys

import properties

client, path, user, topic = sys.argv[1:5]
password = user + "-secret"
here = os.path.dirname(os.path.abspath(__file__))

props = properties.read(path)


def produce_as_user():
    """secure_client.py produce TOPIC, logged in as USER: (exit status, output)."""
    user_props = dict(props, **{"sasl.username": user, "sasl.password": password})
    user_path = os.path.join(os.path.dirname(os.path.abspath(path)), "%s.properties" % user)
    with open(user_path, "w") as f:
        f.write("".join("%s=%s\n" % kv for kv in user_props.items()))
    # Every login of the tests comes from 127.0.0.1, whose failures the broker's throttle counts
    # together: past ten, each judged login waits up to 5 s, so the deleted user's refusal may
    # come later than the 5 s the plaintext-refusal tests give kafka-python to bootstrap.
    env = dict(os.environ, ISR_BOOTSTRAP_TIMEOUT_MS="15000")
    run = subprocess.run(
        [sys.executable, os.path.join(here, "secure_client.py"), client, user_path, "produce", topic],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
    )
    return run.returncode, run.stdout + run.stderr


def check_steps(add_user, user_mechanisms, allow_write, described, delete_acls, delete_user):
    add_user()
    mechanisms = user_mechanisms()
    assert mechanisms == ["SCRAM-SHA-512"], mechanisms
    allow_write()
    assert sorted(described()) == ["READ", "WRITE"], described()
    status, out = produce_as_user()
    assert status == 0 and "OK" in out, out
    assert delete_acls() == 2
    status, out = produce_as_user()
    refused = ("TOPIC_AUTHORIZATION_FAILED", "TopicAuthorizationFailedError")
    assert status == 3 and any(name in out for name in refused), out
    delete_user()
    status, out = produce_as_user()
    assert status != 0 and "AUTHENTICATION" in out.upper(), out


def confluent():
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient(props)
    mine = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, "User:" + user, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )

    def alter(alteration):
        for future in admin.alter_user_scram_credentials([alteration]).values():
            future.result()

    def add_user():
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
        alter(UserScramCredentialUpsertion(user, info, password.encode()))

    def user_mechanisms():
        description = admin.describe_user_scram_credentials([user])[user].result()
        return [i.mechanism.name.replace("_", "-") for i in description.scram_credential_infos]

    def allow_write():
        bindings = [
            AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:" + user,
                       "*", op, AclPermissionType.ALLOW)
            for op in (AclOperation.READ, AclOperation.WRITE)
        ]
        for future in admin.create_acls(bindings).values():
            future.result()

    def described():
        return [b.operation.name for b in admin.describe_acls(mine).result()]

    def delete_acls():
        return sum(len(f.result()) for f in admin.delete_acls([mine]).values())

    def delete_user():
        alter(UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512))

    check_steps(add_user, user_mechanisms, allow_write, described, delete_acls, delete_user)


def kafka_python():
    from kafka import KafkaAdminClient
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = KafkaAdminClient(
        bootstrap_servers=props["bootstrap.servers"].split(","),
        security_protocol=props["security.protocol"],
        sasl_mechanism=props["sasl.mechanism"],
        sasl_plain_username=props["sasl.username"],
        sasl_plain_password=props["sasl.password"],
        ssl_cafile=props["ssl.ca.location"],
    )
    mine = ACLFilter(
        "User:" + user, None, ACLOperation.ANY, ACLPermissionType.ANY,
        ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY),
    )

    def add_user():
        upsert = UserScramCredentialUpsertion(
            user, ScramMechanism.SCRAM_SHA_512, password, iterations=8192
        )
        result = admin.alter_user_scram_credentials([upsert])
        assert result == {user: None}, result

    def user_mechanisms():
        described = admin.describe_user_scram_credentials([user])[user]
        assert described["error"] is None, described
        return [i["mechanism"].name.replace("_", "-") for i in described["credential_infos"]]

    def allow_write():
        acls = [
            ACL("User:" + user, "*", op, ACLPermissionType.ALLOW,
                ResourcePattern(ResourceType.TOPIC, topic))
            for op in (ACLOperation.READ, ACLOperation.WRITE)
        ]
        result = admin.create_acls(acls)
        assert not result["failed"], result

    def described():
        acls, error = admin.describe_acls(mine)
        assert error.errno == 0, error
        return [a.operation.name for a in acls]

    def delete_acls():
        ((_, matched, error),) = admin.delete_acls([mine])
        assert error.errno == 0, error
        return len(matched)

    def delete_user():
        result = admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)]
        )
        assert result == {user: None}, result

    check_steps(add_user, user_mechanisms, allow_write, described, delete_acls, delete_user)
    admin.close()


{"confluent": confluent, "kafka-python": kafka_python}[client]()
print("OK", flush=True)
