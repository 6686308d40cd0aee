/** Entry point. In the `e2e` build only, a mock backend is installed before the app starts. */
import "./style.css";
import { startApp } from "./app";

if (import.meta.env.MODE === "e2e") {
  const { installMockBackend } = await import("./ipc/mock/backend");
  installMockBackend();
}
startApp(document.getElementById("app")!);
