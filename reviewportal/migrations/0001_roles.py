"""The portal's permissions and the three role groups.

The content type and permissions are created here rather than left to post_migrate, so the groups can be given
them in the same migration. The lists are frozen copies: a later change to roles is a new migration.
"""

from django.db import migrations, models

PERMISSIONS = (
    ("review_queue", "Can see the review queue"),
    ("decide_verification", "Can record a decision on a verification"),
    ("view_history", "Can browse verdict history"),
    ("view_findings", "Can see findings"),
    ("close_finding", "Can acknowledge or close a finding with a rationale"),
    ("administer_keys", "Can pin, rotate and revoke keys"),
    ("administer_users", "Can manage users and API tokens"),
    ("inspect_chains", "Can inspect receipt chains"),
    ("inspect_evidence", "Can inspect cited evidence spans"),
    ("view_security_log", "Can read the security log"),
)

ROLES = {
    "reviewer": ("review_queue", "decide_verification", "view_history"),
    "manager": ("view_history", "view_findings", "close_finding"),
    "admin": tuple(codename for codename, _ in PERMISSIONS),
}


def create_roles(apps, schema_editor):
    content_type_model = apps.get_model("contenttypes", "ContentType")
    permission_model = apps.get_model("auth", "Permission")
    group_model = apps.get_model("auth", "Group")
    db = schema_editor.connection.alias

    content_type, _ = content_type_model.objects.using(db).get_or_create(app_label="reviewportal", model="portalaccess")
    permissions = {}
    for codename, name in PERMISSIONS:
        permission, _ = permission_model.objects.using(db).get_or_create(
            content_type=content_type, codename=codename, defaults={"name": name}
        )
        permissions[codename] = permission
    for group_name, codenames in ROLES.items():
        group, _ = group_model.objects.using(db).get_or_create(name=group_name)
        group.permissions.set([permissions[codename] for codename in codenames])


def remove_roles(apps, schema_editor):
    db = schema_editor.connection.alias
    apps.get_model("auth", "Group").objects.using(db).filter(name__in=ROLES).delete()
    apps.get_model("auth", "Permission").objects.using(db).filter(
        content_type__app_label="reviewportal", codename__in=[codename for codename, _ in PERMISSIONS]
    ).delete()


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.CreateModel(
            name="PortalAccess",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
            ],
            options={
                "managed": False,
                "default_permissions": (),
                "permissions": PERMISSIONS,
            },
        ),
        migrations.RunPython(create_roles, remove_roles),
    ]
