"""A TCP relay on 127.0.0.1 that holds every answer back: a coordinator that is alive but
answers late (overloaded, swapping, CPU-throttled by its limit), as its callers see it.

Requests pass at once; each chunk of the answer is delivered ``delay_s`` after it arrived
from the server. Setting ``delay_s`` to 0 ends the fault for the chunks that follow.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator

from hack.ports import free_port


class SlowLink:
    """Relay from :attr:`url` to ``target_port``, answers late by :attr:`delay_s`."""

    def __init__(self, target_port: int, delay_s: float) -> None:
        self.delay_s = delay_s
        self._target_port = target_port
        self._port = free_port()
        self.url = f"http://127.0.0.1:{self._port}"
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._open: set[asyncio.StreamWriter] = set()
        self._thread = threading.Thread(target=self._serve, name="slowlink", daemon=True)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._relay, "127.0.0.1", self._port)
        )
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            relays = asyncio.all_tasks(self._loop)
            for task in relays:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*relays, return_exceptions=True))
            for writer in self._open:  # every socket closed before the loop is
                writer.close()
            closing = [writer.wait_closed() for writer in self._open]
            self._loop.run_until_complete(asyncio.gather(*closing, return_exceptions=True))
            self._loop.run_until_complete(server.wait_closed())
            self._loop.close()

    async def _relay(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self._open.add(client_w)
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", self._target_port)
        except OSError:
            client_w.close()
            return
        self._open.add(server_w)
        # Cancelled when the link stops: ended quietly, or asyncio's stream callback would
        # log the cancelled task.
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(
                self._pipe(client_r, server_w, late=False),
                self._pipe(server_r, client_w, late=True),
                return_exceptions=True,
            )

    async def _pipe(
        self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, late: bool
    ) -> None:
        try:
            while chunk := await source.read(65536):
                if late and self.delay_s:
                    await asyncio.sleep(self.delay_s)
                sink.write(chunk)
                await sink.drain()
        finally:
            sink.close()

    @contextlib.contextmanager
    def serving(self) -> Iterator[SlowLink]:
        """Relay while the block runs."""
        self._thread.start()
        self._ready.wait()
        try:
            yield self
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
