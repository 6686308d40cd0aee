import { describe, expect, it } from "vitest";
import { modelLabel } from "./topbar";

describe("the header's model name", () => {
  it("shows a catalogue name as it is and a GGUF path by its file name", () => {
    expect(modelLabel("qwen2.5-coder-0.5b")).toBe("qwen2.5-coder-0.5b");
    expect(modelLabel("/home/ana/models/SmolLM2-135M-Instruct.Q4_1.gguf")).toBe("SmolLM2-135M-Instruct.Q4_1");
    expect(modelLabel("C:\\Users\\ana\\qwen.GGUF")).toBe("qwen");
    expect(modelLabel("models/")).toBe("models/");
  });
});
