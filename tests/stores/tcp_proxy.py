"""A loopback TCP proxy in front of a real Redis or PostgreSQL server, for fault tests.

It forwards every byte both ways until told to misbehave:

* :meth:`Proxy.drop_reply_containing` lets the next request through, so the server applies
  it, then throws away the server's reply that contains a marker and cuts the connection: the
  client never learns that its write happened (a lost reply);
* :meth:`Proxy.freeze` stops forwarding in both directions while keeping every connection
  open (a frozen server, or a network that silently drops packets);
  :meth:`Proxy.freeze_after_reply_containing` does so right after forwarding the next server
  reply that holds a marker (a server that freezes once it has accepted a connection);
* :meth:`Proxy.refuse` cuts every connection and refuses new ones (a server that is down)
  until :meth:`Proxy.restore`.

Everything listens on and connects to 127.0.0.1 only, runs in daemon threads and stops with
:meth:`Proxy.close`.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from urllib.parse import urlsplit, urlunsplit


class Proxy:
    """Forward 127.0.0.1:<port> to ``upstream_port``; see the module docs."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._drop_marker: bytes | None = None
        self._freeze_marker: bytes | None = None
        self.dropped = threading.Event()
        self._frozen = False
        self._refusing = False
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def url_for(self, url: str) -> str:
        """``url`` with its host and port replaced by the proxy's."""
        parts = urlsplit(url)
        netloc = parts.netloc.rsplit("@", 1)
        host = f"127.0.0.1:{self.port}"
        netloc[-1] = host
        return urlunsplit(parts._replace(netloc="@".join(netloc)))

    # -- faults --------------------------------------------------------------------------

    def drop_reply_containing(self, marker: bytes) -> None:
        """Drop the next server reply holding ``marker`` and cut that connection."""
        with self._lock:
            self.dropped.clear()
            self._drop_marker = marker

    def freeze(self) -> None:
        with self._lock:
            self._frozen = True

    def freeze_after_reply_containing(self, marker: bytes) -> None:
        """Forward the next server reply holding ``marker``, then freeze everything."""
        with self._lock:
            self._freeze_marker = marker

    def refuse(self) -> None:
        with self._lock:
            self._refusing = True
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            _close(*pair)

    def restore(self) -> None:
        with self._lock:
            self._frozen = False
            self._refusing = False

    def close(self) -> None:
        self._closed = True
        self.refuse()
        self._listener.close()

    # -- plumbing ------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._refusing:
                client.close()
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, server))
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        peers = {client: server, server: client}
        try:
            while not self._closed:
                if self._frozen:
                    threading.Event().wait(0.01)
                    continue
                readable, _, _ = select.select(list(peers), [], [], 0.05)
                for sock in readable:
                    if self._frozen:
                        break
                    data = sock.recv(65536)
                    if not data:
                        return
                    if sock is server and self._should_drop(data):
                        return
                    peers[sock].sendall(data)
                    if sock is server:
                        self._freeze_on(data)
        except (OSError, ValueError):  # ValueError: refuse() closed the sockets under us
            return
        finally:
            _close(client, server)

    def _freeze_on(self, data: bytes) -> None:
        with self._lock:
            if self._freeze_marker is not None and self._freeze_marker in data:
                self._freeze_marker = None
                self._frozen = True

    def _should_drop(self, data: bytes) -> bool:
        with self._lock:
            if self._drop_marker is None or self._drop_marker not in data:
                return False
            self._drop_marker = None
        self.dropped.set()
        return True


def _close(*socks: socket.socket) -> None:
    for sock in socks:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
