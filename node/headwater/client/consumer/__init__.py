"""The consumer: :class:`~headwater.client.consumer.consumer.Consumer` and what fetches for it.

``consumer`` is the user's API; ``fetcher`` keeps fetches in flight to the
partition leaders and hands out records; ``offsets`` looks offsets up by
timestamp (ListOffsets); ``range_reader`` reads fixed offset ranges without a
group (the Spark connector's reader).  Group membership is
:mod:`headwater.client.group`, below this package; the subscription state both
share is :mod:`headwater.client.subscription`.
"""
