"""Every tunable number of kith, named, in one place.

Defaults follow the design seeds (``../shared/seeds``) where they name a figure; the
settings in :mod:`core.config` take their defaults from here, so a reader who wants to
know "why 0.85?" finds every threshold, budget, limit and hour side by side.
"""

from __future__ import annotations

# --- LLM -------------------------------------------------------------------------
LLM_TIMEOUT_S = 60.0
LLM_MAX_RETRIES = 2
LLM_MAX_REPLY_TOKENS = 1024

# --- Conversation history and the bounded prompt (seed 002) ------------------------
HISTORY_WINDOW_MESSAGES = 40  # recent window every turn sees
SUMMARY_TRIGGER_MESSAGES = 20  # summarize once this many messages fell out of the window
SUMMARY_BATCH_MESSAGES = 200  # at most this many messages folded per summarizer run

# Character budgets of each prompt part; their sum bounds the prompt whatever the thread's age.
BUDGET_PERSONA_CHARS = 4_000
BUDGET_PINNED_CHARS = 1_600
BUDGET_RECALL_CHARS = 1_600  # seed 000: memoryRecallChars
BUDGET_GOALS_CHARS = 800
BUDGET_SUMMARY_CHARS = 2_000
BUDGET_RECENT_CHARS = 12_000
BUDGET_MESSAGE_CHARS = 8_000  # the new message itself
BUDGET_MESSAGE_ITEM_CHARS = 2_000  # any one older message inside the recent window

# --- Memory: capture and validation (seed 000) --------------------------------------
CAPTURE_TIMEOUT_S = 60.0
MAX_MEMORIES_PER_RUN = 30
MAX_MEMORY_CHARS = 2_000
MAX_EVIDENCE_CHARS = 2_000

# --- Memory: similarity, merge and conflict (seed 001) ------------------------------
MERGE_THRESHOLD = 0.85
CONFLICT_THRESHOLD = 0.55
SINGLE_WORD_LINK_SCORE = 0.6  # one shared distinctive word links two short facts
SHORT_FACT_MAX_WORDS = 3  # "short" for the single-word link
PREFIX_MATCH_MIN_CHARS = 4
CONFLICT_MIN_WORDS = 3
CONFLICT_MIN_AGREEMENTS = 2
CONFLICT_MIN_JACCARD = 0.5
GATE_CANDIDATES = 20  # nearest stored memories the gate compares a new fact against

# --- Memory: recall and the prompt's memory parts (seeds 000, 002, 004) -------------
PINNED_MAX = 12
RECALL_MAX_ITEMS = 6
RECALL_ITEM_CHARS = 320
RECALL_VECTOR_WEIGHT = 0.7  # seed 004's blend: 70 % vector,
RECALL_BM25_WEIGHT = 0.3  # 30 % BM25
RECALL_HALF_LIFE_DAYS = 30.0
RECALL_IMPORTANCE_WEIGHT = 0.3
RECALL_USE_CREDIT = 0.05  # per citation, capped below
RECALL_USE_CREDIT_CAP = 0.2
RECALL_EMBED_BUDGET_MS = 150
RECALL_TOOL_MAX_ITEMS = 10

# --- Memory: horizons, decay, notes (seeds 002, 004) -------------------------------
HORIZON_ONE_OFF_DAYS = 30
HORIZON_INTENTION_HOURS = 72
NOTES_RETENTION_DAYS = 14
CONSOLIDATION_HOUR = 3
CONSOLIDATION_CHUNK_CHARS = 12_000

# --- Conflict questions (seeds 001, 004) ---------------------------------------------
QUESTIONS_PER_HOUR = 5
OPEN_QUESTIONS_PER_PERSON = 1

# --- Heartbeat -------------------------------------------------------------------------
HEARTBEAT_EVERY_MINUTES = 30
HEARTBEAT_ACTIVE_START_HOUR = 8
HEARTBEAT_ACTIVE_END_HOUR = 22
HEARTBEAT_TOKEN_BUDGET = 1_500
HEARTBEAT_RETRY_BASE_S = 60.0
HEARTBEAT_MAX_RETRIES = 5

# --- Policy ----------------------------------------------------------------------------
PAIRING_CODE_LENGTH = 8
PAIRING_CODE_TTL_S = 3_600
PAIRING_MAX_PENDING = 3  # per platform
RATE_LIMIT_BURST = 8  # messages a sender may send at once
RATE_LIMIT_PER_MINUTE = 20.0  # sustained refill
LINK_CODE_TTL_S = 600

# --- Delivery --------------------------------------------------------------------------
DISCORD_READY_TIMEOUT_S = 30.0
TELEGRAM_MAX_UTF16 = 4_096
DISCORD_MAX_CHARS = 2_000
SLACK_MAX_CHARS = 3_900  # under the 4,000 characters Slack shows before truncating a message
TERMINAL_MAX_CHARS = 100_000
SEND_MAX_ATTEMPTS = 6
SEND_BACKOFF_BASE_S = 1.0
SEND_BACKOFF_MAX_S = 60.0
TYPING_REFRESH_S = 4.0  # Telegram's typing status lasts ~5 s
TYPING_DELAY_S = 0.3  # no indicator for a reply ready sooner than this
DEBOUNCE_MS = 800  # rapid messages from one sender inside this window become one turn
INBOUND_DEDUPE_DAYS = 7
