"""Who owns an SDK's clients, apart from how requests are built.

As pydantic-ai's providers are "in charge of providing an authenticated client", an
:class:`SDKClients` holds one SDK's sync and async client: the ones passed in are used as
they are (an async one given as ``client`` serves the async calls); a missing one is created
on first use, mirroring the other client's server and key (so sync and async calls reach the
same place) or else from the adapter's own settings; only clients created here are closed.
:class:`SDKSummarizer` is the adapter base that talks through such a pair.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable
from typing import Any, ClassVar

from contextfold.errors import ConfigError
from contextfold.summarizers._extras import ensure_installed, import_extra
from contextfold.summarizers._template import ProviderSummarizer
from contextfold.summarizers._wire import request_timeout
from contextfold.summarizers.base import SummaryRequest
from contextfold.summarizers.settings import SummarizerSettings, settings_or_default

__all__ = ["SDKClients", "SDKSummarizer"]


class SDKClients:
    """One SDK's sync and async clients: given ones kept, missing ones made and owned.

    Args:
        sdk: ``(module, feature named in errors, extra to install)``.
        class_names: the names of the SDK's sync and async client classes.
        client: the sync client given (an async one is taken as ``async_client``).
        async_client: the async client given.
        mirror: the constructor settings that make a twin of a given client.
        defaults: the constructor settings of a client made from scratch.

    Raises:
        MissingExtraError: a client must be created later and the SDK is not installed.
    """

    def __init__(
        self,
        sdk: tuple[str, str, str],
        class_names: tuple[str, str],
        *,
        client: Any,
        async_client: Any,
        mirror: Callable[[Any], dict[str, Any]],
        defaults: dict[str, Any],
    ) -> None:
        if client is None or async_client is None:
            ensure_installed(*sdk)
        if type(client).__name__.startswith("Async"):  # AsyncOpenAI given as client=
            client, async_client = None, async_client or client
        self.sdk = sdk
        self.class_names = class_names
        self.client = client
        self.async_client = async_client
        self._mirror = mirror
        self._defaults = dict(defaults)
        self._owned: list[Any] = []
        self._lock = threading.Lock()

    def _settings_for(self, twin: Any) -> dict[str, Any]:
        if twin is None:
            return dict(self._defaults)
        # Mirror the client the caller gave us, so sync and async talk to the same server.
        if type(twin).__name__ not in self.class_names:
            raise ConfigError(
                f"cannot derive a twin of a {type(twin).__name__} client; "
                "pass both client= and async_client=",
                argument="async_client",
            )
        return self._mirror(twin)

    def _create(self, class_name: str, twin: Any) -> Any:
        """A new SDK client of ``class_name``, owned (and later closed) here."""
        module = import_extra(*self.sdk)
        client = getattr(module, class_name)(**self._settings_for(twin))
        self._owned.append(client)
        return client

    def sync(self) -> Any:
        """The sync client, created on first use when none was given."""
        with self._lock:
            if self.client is None:
                self.client = self._create(self.class_names[0], self.async_client)
            return self.client

    def async_(self) -> Any:
        """The async client, created on first use when none was given."""
        with self._lock:
            if self.async_client is None:
                self.async_client = self._create(self.class_names[1], self.client)
            return self.async_client

    def close(self) -> None:
        """Close the sync client created here (clients passed in are left open)."""
        for owned in list(self._owned):
            if owned is self.client:
                owned.close()
                self._owned.remove(owned)
                self.client = None

    async def aclose(self) -> None:
        """Close every client created here (clients passed in are left open)."""
        self.close()
        for owned in list(self._owned):
            await owned.close()
            self._owned.remove(owned)
            self.async_client = None


class SDKSummarizer(ProviderSummarizer):
    """A provider adapter that talks through an SDK's sync and async client pair.

    Subclasses name the SDK module and its client classes, say which settings a mirrored
    client copies (:meth:`_mirror_settings`) and make the call (:meth:`_send`).
    """

    #: The SDK module to import, as ``(module, feature named in errors, extra to install)``.
    sdk: ClassVar[tuple[str, str, str]]
    #: The names of the SDK's sync and async client classes.
    client_classes: ClassVar[tuple[str, str]]

    def __init__(
        self,
        client: Any,
        *,
        async_client: Any,
        model: str,
        base_url: str | None,
        api_key: str | None,
        settings: SummarizerSettings | None,
    ) -> None:
        """Keep the model, the settings and the clients given (see :class:`SDKClients`)."""
        if not isinstance(model, str) or not model:
            raise ConfigError(f"model must be a non-empty string, not {model!r}", argument="model")
        self.model = model
        self.base_url = base_url
        self.api_key = api_key
        self.settings = settings_or_default(settings)
        own: dict[str, Any] = {"base_url": base_url, "api_key": api_key}
        own.update(timeout=self.settings.timeout, max_retries=self.settings.max_retries)
        self.clients = SDKClients(
            self.sdk,
            self.client_classes,
            client=client,
            async_client=async_client,
            mirror=self._mirror_settings,
            defaults={k: v for k, v in own.items() if v is not None},
        )

    @abc.abstractmethod
    def _send(self, client: Any, request: SummaryRequest) -> Any:
        """Make the SDK call on ``client`` (its answer, or an awaitable for an async client)."""

    @abc.abstractmethod
    def _mirror_settings(self, other: Any) -> dict[str, Any]:
        """The constructor settings that make a twin of ``other`` (an SDK client)."""

    def _start(self, request: SummaryRequest) -> Any:
        return self._send(_within_deadline(self.clients.sync(), request), request)

    async def _astart(self, request: SummaryRequest) -> Any:
        return await self._send(_within_deadline(self.clients.async_(), request), request)

    def _stream_options(self) -> dict[str, Any]:
        """Request fields that go with ``stream=True`` (none unless the provider needs some)."""
        return {}

    def _add_call_options(self, kwargs: dict[str, Any], request: SummaryRequest) -> None:
        """The request fields every SDK call carries alike, added to ``kwargs`` in place.

        Temperature and extra body fields when set, the stream flag, and the per-call
        timeout that keeps the call inside the request's deadline.
        """
        settings = self.settings
        if settings.temperature is not None:
            kwargs["temperature"] = settings.temperature
        if settings.stream:
            kwargs["stream"] = True
            kwargs.update(self._stream_options())
        timeout = request_timeout(request, settings.timeout)
        if timeout is not None:
            kwargs["timeout"] = timeout
        if settings.extra_body:
            kwargs["extra_body"] = dict(settings.extra_body)

    def close(self) -> None:
        """Close the sync client this summarizer created (clients passed in are left open)."""
        self.clients.close()

    async def aclose(self) -> None:
        """Close every client this summarizer created (clients passed in are left open)."""
        await self.clients.aclose()


def _within_deadline(client: Any, request: SummaryRequest) -> Any:
    """``client``, without the SDK's own retries when the request has a deadline.

    The deadline bounds each attempt's timeout, not the retries after it: a sync call given
    up on at its deadline would go on retrying, each attempt billed and never accounted for.
    """
    if request.deadline is None or not hasattr(client, "with_options"):
        return client
    return client.with_options(max_retries=0)
