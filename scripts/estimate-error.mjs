// Measures the error of Tollgate's input-token estimate (ADR 0003) against real tokenizers.
//
//   node scripts/estimate-error.mjs
//
// The estimator is imported from the source (src/limits/estimate.ts, bundled in memory with esbuild), so
// this measures the rule Tollgate runs. Anthropic's tokenizer is not available offline; the OpenAI
// encodings o200k_base and cl100k_base (js-tiktoken, ranks shipped in the package) are the proxy.
// The sample is generated deterministically (seeded PRNG, no downloads): 25 request bodies in each of
// 10 categories, from one sentence to a few thousand tokens.
import { build } from "esbuild"
import { Tiktoken } from "js-tiktoken/lite"
import cl100k_base from "js-tiktoken/ranks/cl100k_base"
import o200k_base from "js-tiktoken/ranks/o200k_base"
import { fileURLToPath } from "node:url"

const bundled = await build({
  entryPoints: [fileURLToPath(new URL("../src/limits/estimate.ts", import.meta.url))],
  bundle: true,
  write: false,
  format: "esm",
  platform: "node",
  target: "node20",
  logLevel: "warning",
})
const source = Buffer.from(bundled.outputFiles[0].text).toString("base64")
const { estimateInputTokens } = await import(`data:text/javascript;base64,${source}`)

// mulberry32: a small deterministic PRNG, so every run measures the same sample.
let seed = 3
const random = () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}
const int = (lo, hi) => lo + Math.floor(random() * (hi - lo + 1))
const pick = (list) => list[Math.floor(random() * list.length)]
/** A length from 1 to `max`, log-uniform: as many short prompts as long ones. */
const size = (max) => Math.max(1, Math.round(Math.exp(random() * Math.log(max))))
const sentences = (pool, n, sep = " ") => Array.from({ length: n }, () => pick(pool)).join(sep)

const ENGLISH = [
  "Please summarize the attached report and list the three most important findings.",
  "Our checkout service times out under load, and I suspect the connection pool is too small.",
  "Write a polite email to the customer explaining that the refund will arrive within five business days.",
  "The committee postponed its decision until the auditors have reviewed the quarterly figures.",
  "Can you explain the difference between a process and a thread, with a short example?",
  "In the late afternoon the harbour filled with fishing boats returning from the open sea.",
  "Rewrite this paragraph so that it is clearer, but keep the technical terms unchanged.",
  "We migrated the database last weekend; since then, some reports show duplicated rows.",
  "Translate the following instructions into plain language for first-time users.",
  "She argued that the policy, although well intended, would burden small businesses.",
  "What are the trade-offs between eventual consistency and strong consistency in practice?",
  "Draft a short product description for a waterproof hiking backpack with a 30-litre capacity.",
  "The test suite passes locally but fails in CI with a timeout in the integration stage.",
  "Give me a step-by-step plan to learn statistics in three months, assuming basic algebra.",
  "Honestly, I'm not sure whether the new onboarding flow improved retention at all.",
  "List the assumptions behind this forecast and say which ones are the most fragile.",
  "Thank you for your patience while we investigated the outage on Tuesday morning.",
  "The museum's new wing displays sculptures from the early Renaissance to the present day.",
  "If the cache misses, the service queries the primary database, which adds latency.",
  "Compare these two contracts and highlight every clause where the obligations differ.",
]
const CODE = [
  "export const retry = async <T>(fn: () => Promise<T>, attempts = 3): Promise<T> => {\n  let last: unknown\n  for (let i = 0; i < attempts; i++) {\n    try {\n      return await fn()\n    } catch (error) {\n      last = error\n    }\n  }\n  throw last\n}\n",
  'def parse_config(path: str) -> dict:\n    with open(path, "r", encoding="utf-8") as handle:\n        data = yaml.safe_load(handle)\n    if "server" not in data:\n        raise ValueError("missing server section")\n    return data\n',
  "func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {\n\ts.mu.RLock()\n\tdefer s.mu.RUnlock()\n\tv, ok := s.items[key]\n\tif !ok {\n\t\treturn nil, ErrNotFound\n\t}\n\treturn v, nil\n}\n",
  "SELECT u.id, u.email, COUNT(o.id) AS orders\nFROM users u\nLEFT JOIN orders o ON o.user_id = u.id\nWHERE u.created_at >= '2024-01-01'\nGROUP BY u.id, u.email\nORDER BY orders DESC\nLIMIT 50;\n",
  '#!/usr/bin/env bash\nset -euo pipefail\nfor file in "$@"; do\n  if [[ -f "$file" ]]; then\n    gzip -9 "$file" && echo "compressed $file"\n  fi\ndone\n',
  "impl Iterator for Fibonacci {\n    type Item = u64;\n    fn next(&mut self) -> Option<Self::Item> {\n        let next = self.a.checked_add(self.b)?;\n        self.a = self.b;\n        self.b = next;\n        Some(self.a)\n    }\n}\n",
  "class LRUCache:\n    def __init__(self, capacity):\n        self.capacity = capacity\n        self.items = OrderedDict()\n\n    def get(self, key):\n        if key not in self.items:\n            return -1\n        self.items.move_to_end(key)\n        return self.items[key]\n",
  "const router = express.Router()\nrouter.get('/users/:id', async (req, res) => {\n  const user = await db.users.findUnique({ where: { id: Number(req.params.id) } })\n  if (!user) return res.status(404).json({ error: 'not found' })\n  res.json(user)\n})\n",
]
const ZH = [
  "请帮我总结一下这篇关于气候变化的文章，重点说明对农业的影响。",
  "我们的服务器在高峰时段响应很慢，可能是数据库连接池太小了。",
  "这个函数的时间复杂度是多少？有没有更好的实现方法？",
  "明天上午十点在三楼会议室开会，请准时参加。",
  "用户反馈说登录页面在手机上显示不正常，需要尽快修复。",
  "根据最新的财务报告，公司第三季度的收入增长了百分之十二。",
  "机器学习模型需要大量高质量的训练数据才能取得好的效果。",
  "如果缓存失效，系统会直接查询数据库，这会增加延迟。",
]
const JA = [
  "明日の会議の資料を今日中に送っていただけますか。",
  "このエラーメッセージの意味を詳しく説明してください。",
  "東京の春は桜がとてもきれいで、多くの観光客が訪れます。",
  "新しい機能のテストはすべて成功しましたが、性能にはまだ課題があります。",
  "データベースのバックアップは毎晩午前二時に実行されます。",
  "このコードをリファクタリングして、読みやすくしてほしいです。",
]
const KO = [
  "다음 주 회의 일정을 다시 확인해 주세요.",
  "이 문서를 한국어로 번역하고 중요한 부분을 요약해 주세요.",
  "서버 로그에 오류가 계속 발생하고 있어서 원인을 찾고 있습니다.",
  "서울의 가을 날씨는 맑고 선선해서 산책하기 좋습니다.",
  "고객 만족도를 높이기 위한 방법을 세 가지 제안해 주세요.",
  "이 알고리즘의 성능을 개선할 수 있는 방법이 있을까요?",
]
const CYRILLIC = [
  "Пожалуйста, кратко перескажи эту статью и выдели главные выводы.",
  "Сервер перестал отвечать после обновления, и мы ищем причину сбоя.",
  "Завтра в десять утра состоится встреча с клиентом в главном офисе.",
  "Эта функция возвращает пустой список, если пользователь не найден.",
  "Объясни, пожалуйста, разницу между процессом и потоком в операционной системе.",
  "Отчёт за третий квартал показывает рост выручки на двенадцать процентов.",
  "База данных работает медленно из-за отсутствия нужных индексов.",
  "Будь ласка, перевір цей код і знайди можливі помилки.",
  "Київ навесні дуже гарний, коли цвітуть каштани.",
]
const ARABIC = [
  "من فضلك لخص هذا المقال واذكر أهم النتائج.",
  "توقف الخادم عن الاستجابة بعد التحديث الأخير ونحن نبحث عن السبب.",
  "سيعقد الاجتماع غدا في الساعة العاشرة صباحا في المكتب الرئيسي.",
  "هذه الدالة تعيد قائمة فارغة إذا لم يتم العثور على المستخدم.",
  "اشرح لي الفرق بين العملية والخيط في نظام التشغيل.",
  "يظهر التقرير المالي نموا في الإيرادات بنسبة اثني عشر بالمئة.",
  "ترجم هذا النص إلى اللغة الإنجليزية مع الحفاظ على الأسلوب الرسمي.",
]
const EMOJI = [
  "😀",
  "🚀",
  "🔥",
  "👍",
  "🎉",
  "❤️",
  "😂",
  "🤔",
  "✅",
  "❌",
  "👨‍👩‍👧‍👦",
  "🇯🇵",
  "👋🏽",
  "🧑‍💻",
  "🌍",
  "☕",
  "📈",
  "🙏",
  "✨",
  "⚠️",
  "🐛",
]
const WORDS = [
  "alpha",
  "beta",
  "user",
  "order",
  "invoice",
  "status",
  "region",
  "price",
  "note",
  "id",
  "ok",
  "Zürich",
  "日本",
]

const jsonValue = (depth) => {
  const r = random()
  if (depth > 2 || r < 0.35) return pick([int(0, 99999), random() * 1000, pick(WORDS), random() < 0.5, null])
  if (r < 0.6) return Array.from({ length: int(1, 4) }, () => jsonValue(depth + 1))
  return Object.fromEntries(
    Array.from({ length: int(1, 6) }, () => [pick(WORDS) + int(0, 9), jsonValue(depth + 1)]),
  )
}
const number = () =>
  pick([
    () => String(int(0, 999999999)),
    () => (random() * 10000 - 5000).toFixed(int(1, 6)),
    () =>
      `${int(1, 99)},${String(int(0, 999)).padStart(3, "0")},${String(int(0, 999)).padStart(3, "0")}.${int(10, 99)}`,
    () =>
      `2024-${String(int(1, 12)).padStart(2, "0")}-${String(int(1, 28)).padStart(2, "0")}T${int(10, 23)}:${int(10, 59)}:${int(10, 59)}Z`,
    () => `+1-${int(200, 999)}-${int(200, 999)}-${int(1000, 9999)}`,
    () => `${(random() * 9 + 1).toFixed(3)}e-${int(1, 12)}`,
  ])()
const TOOL_NAMES = [
  "get_weather",
  "search_docs",
  "create_ticket",
  "run_sql",
  "send_email",
  "read_file",
  "list_orders",
  "translate",
]
const tool = (openai) => {
  const properties = Object.fromEntries(
    Array.from({ length: int(1, 5) }, () => [
      pick(WORDS) + "_" + pick(["id", "name", "limit", "query", "unit"]),
      random() < 0.5
        ? { type: "string", description: pick(ENGLISH) }
        : { type: "integer", minimum: 0, maximum: int(10, 1000) },
    ]),
  )
  const schema = { type: "object", properties, required: Object.keys(properties).slice(0, 1) }
  const name = pick(TOOL_NAMES)
  const description = sentences(ENGLISH, int(1, 3))
  return openai
    ? { type: "function", function: { name, description, parameters: schema } }
    : { name, description, input_schema: schema }
}

const user = (content) => ({ role: "user", content })
const CATEGORIES = {
  english: () => ({ messages: [user(sentences(ENGLISH, size(120)))] }),
  code: () => ({
    system: "You are a senior engineer. Review code for bugs and style.",
    messages: [user(`Review this code:\n\n${sentences(CODE, size(30), "\n")}`)],
  }),
  json: () => ({
    messages: [
      user([
        { type: "text", text: "Extract the invalid records from this payload:" },
        {
          type: "text",
          text: JSON.stringify(
            Array.from({ length: size(60) }, () => jsonValue(0)),
            null,
            pick([0, 2]),
          ),
        },
      ]),
    ],
  }),
  cjk: () => ({ messages: [user(sentences(pick([ZH, JA, KO]), size(150), ""))] }),
  cyrillic: () => ({ messages: [user(sentences(CYRILLIC, size(120)))] }),
  arabic: () => ({ messages: [user(sentences(ARABIC, size(120)))] }),
  emoji: () => ({
    messages: [
      user(
        Array.from({ length: size(200) }, () => {
          const words = pick(ENGLISH).split(" ").slice(0, int(0, 6)).join(" ")
          return `${words} ${Array.from({ length: int(1, 5) }, () => pick(EMOJI)).join("")}`
        }).join(" "),
      ),
    ],
  }),
  numbers: () => ({
    messages: [
      user(
        `Sum each row:\n${Array.from({ length: size(150) }, () => Array.from({ length: int(2, 8) }, number).join(",")).join("\n")}`,
      ),
    ],
  }),
  tools: () => {
    const openai = random() < 0.5
    return {
      tools: Array.from({ length: int(1, 12) }, () => tool(openai)),
      messages: [user(pick(ENGLISH))],
    }
  },
  agent: () => {
    const messages = [user(pick(ENGLISH))]
    for (let turn = size(8); turn > 0; turn--) {
      const input = jsonValue(1)
      messages.push({
        role: "assistant",
        content: [
          { type: "text", text: pick(ENGLISH) },
          { type: "tool_use", id: `toolu_${int(1000, 9999)}`, name: pick(TOOL_NAMES), input },
        ],
      })
      const output = random() < 0.5 ? JSON.stringify(jsonValue(0)) : sentences(ENGLISH, size(10))
      messages.push(
        user([{ type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "text", text: output }] }]),
      )
    }
    return { system: sentences(ENGLISH, size(20)), tools: [tool(false), tool(false)], messages }
  },
}

/** The text the model reads, in the pieces the estimator counts (JSON where the estimator counts JSON). */
const pieces = (body) => {
  const out = []
  if (body.system !== undefined) out.push(body.system)
  if (body.tools !== undefined) out.push(JSON.stringify(body.tools))
  for (const message of body.messages) {
    if (typeof message.content === "string") out.push(message.content)
    else
      for (const block of message.content) {
        if (block.type === "text") out.push(block.text)
        if (block.type === "tool_use") out.push(block.name, JSON.stringify(block.input))
        if (block.type === "tool_result") for (const inner of block.content) out.push(inner.text)
      }
  }
  return out
}

const encoders = { o200k_base: new Tiktoken(o200k_base), cl100k_base: new Tiktoken(cl100k_base) }
const sample = []
for (const [category, make] of Object.entries(CATEGORIES)) {
  for (let i = 0; i < 25; i++) {
    const body = { model: "claude-sonnet-5-5", max_tokens: 1024, ...make() }
    const estimate = estimateInputTokens(body)
    const bytes = pieces(body).reduce((sum, text) => sum + Buffer.byteLength(text, "utf8"), 0)
    if (estimate !== Math.ceil(bytes / 4)) throw new Error(`${category}: the estimator counts other text`)
    const real = {}
    for (const [name, encoder] of Object.entries(encoders)) {
      const content = pieces(body).reduce((sum, text) => sum + encoder.encode(text).length, 0)
      // OpenAI's chat framing: 3 tokens per message and 3 to prime the reply (the cookbook's rule).
      real[name] = {
        content,
        framed: content + 3 * body.messages.length + 3 + (body.system === undefined ? 0 : 3),
      }
    }
    sample.push({ category, estimate, real })
  }
}

const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]
const pct = (x) => `${(100 * x).toFixed(1)}%`
const signed = (x) => `${x >= 0 ? "+" : ""}${(100 * x).toFixed(1)}%`
const row = (label, rows, encoder, kind) => {
  const errors = rows.map((r) => (r.estimate - r.real[encoder][kind]) / r.real[encoder][kind])
  const abs = errors.map(Math.abs).sort((a, b) => a - b)
  const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length
  const cells = [
    label,
    String(rows.length),
    pct(mean(abs)),
    pct(quantile(abs, 0.5)),
    pct(quantile(abs, 0.9)),
    signed(mean(errors)),
    pct(errors.filter((e) => e < 0).length / errors.length),
    signed(Math.min(...errors)),
  ]
  return `| ${cells.join(" | ")} |`
}

const categories = Object.keys(CATEGORIES)
const tokens = sample.reduce((sum, r) => sum + r.real.o200k_base.content, 0)
console.log(
  `Sample: ${sample.length} requests, ${tokens} o200k_base content tokens; estimate = ceil(UTF-8 bytes / 4).`,
)
console.log(
  "Relative error = (estimate - real) / real: statistics of |error|, the mean signed error, the share",
)
console.log("of requests underestimated, and the lowest (most underestimated) signed error.")
for (const [encoder, kind, title] of [
  ["o200k_base", "content", "content tokens"],
  ["cl100k_base", "content", "content tokens"],
  ["o200k_base", "framed", "content + chat framing (3 per message, 3 per reply)"],
]) {
  console.log(`\n${encoder}, ${title}\n`)
  console.log("| category | n | mean abs | median abs | p90 abs | mean signed | underestimated | lowest |")
  console.log("|---|---|---|---|---|---|---|---|")
  for (const category of categories) {
    console.log(
      row(
        category,
        sample.filter((r) => r.category === category),
        encoder,
        kind,
      ),
    )
  }
  console.log(row("all", sample, encoder, kind))
}
