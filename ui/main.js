// Lists the models the backend knows (the desktop-app issue replaces this page with the chat).
const list = document.getElementById("models");
const invoke = window.__TAURI__?.core?.invoke;
if (invoke) {
  invoke("models").then((models) => {
    list.replaceChildren(
      ...models.map((m) => {
        const item = document.createElement("li");
        item.textContent = `${m.name} — ${m.role}, ${(m.bytes / 1e6).toFixed(0)} MB`;
        if (m.pulled) item.classList.add("pulled");
        return item;
      }),
    );
  });
}
