/** The list of chats: search, new, open, rename in place, delete with a second click. */
import type { ConversationSummary } from "../ipc/types";
import { h } from "../shell/dom";
import { icon } from "../shell/icons";

export type SidebarActions = {
  open(id: string): void;
  create(): void;
  rename(id: string, title: string): void;
  remove(id: string): void;
  search(query: string): void;
};

export class Sidebar {
  readonly element: HTMLElement;
  private readonly list: HTMLElement;
  private readonly search: HTMLInputElement;
  private searchTimer = 0;

  constructor(private readonly actions: SidebarActions) {
    const create = h("button", { className: "new-chat", type: "button", textContent: "+ New chat" });
    create.addEventListener("click", () => actions.create());
    this.search = h("input", { type: "search", className: "search", placeholder: "Search chats" });
    this.search.setAttribute("aria-label", "Search chats");
    this.search.addEventListener("input", () => {
      clearTimeout(this.searchTimer);
      this.searchTimer = window.setTimeout(() => actions.search(this.search.value.trim()), 200);
    });
    this.list = h("ul", { className: "chat-list" });
    this.element = h(
      "aside",
      { className: "sidebar" },
      h("div", { className: "brand" }, h("span", { className: "brand-mark" }, "⌁"), "Tandem"),
      create,
      this.search,
      this.list,
    );
  }

  get query(): string {
    return this.search.value.trim();
  }

  setItems(items: readonly ConversationSummary[], activeId: string | null): void {
    if (items.length === 0) {
      this.list.replaceChildren(h("li", { className: "chat-list-empty" }, this.query ? "No chat matches." : "No chats yet."));
      return;
    }
    this.list.replaceChildren(...items.map((c) => this.item(c, c.id === activeId)));
  }

  private item(c: ConversationSummary, active: boolean): HTMLElement {
    const open = h(
      "button",
      { className: "chat-open", type: "button", title: c.preview },
      h("span", { className: "chat-name" }, c.local_only ? icon("lock") : null, c.title),
      h("span", { className: "chat-preview" }, c.preview),
    );
    open.addEventListener("click", () => this.actions.open(c.id));
    const rename = h("button", { className: "icon", type: "button", title: "Rename" }, icon("pencil"));
    rename.setAttribute("aria-label", `Rename ${c.title}`);
    const remove = h("button", { className: "icon danger", type: "button", title: "Delete" }, icon("trash"));
    remove.setAttribute("aria-label", `Delete ${c.title}`);
    const li = h("li", { className: active ? "chat-item active" : "chat-item", dataset: { id: c.id } }, open, rename, remove);

    rename.addEventListener("click", () => {
      const input = h("input", { className: "rename", value: c.title });
      input.setAttribute("aria-label", "New title");
      li.replaceChildren(input);
      input.focus();
      input.select();
      let done = false;
      const finish = (save: boolean) => {
        if (done) return;
        done = true;
        const title = input.value.trim();
        if (save && title && title !== c.title) this.actions.rename(c.id, title);
        else li.replaceWith(this.item(c, active));
      };
      input.addEventListener("keydown", (e) => {
        if (e.key === "Enter") finish(true);
        if (e.key === "Escape") {
          e.stopPropagation();
          finish(false);
        }
      });
      input.addEventListener("blur", () => finish(true));
    });

    // Deleting takes a second click, so a stray click never loses a chat.
    let armed = 0;
    remove.addEventListener("click", () => {
      if (armed) {
        clearTimeout(armed);
        this.actions.remove(c.id);
        return;
      }
      remove.textContent = "Delete?";
      remove.classList.add("armed");
      armed = window.setTimeout(() => {
        armed = 0;
        remove.replaceChildren(icon("trash"));
        remove.classList.remove("armed");
      }, 3000);
    });
    return li;
  }
}
