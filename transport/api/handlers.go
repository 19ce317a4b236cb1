package api

import (
	"github.com/valyala/fastjson"

	"github.com/plaudit/plaudit/engine/field"
)

// handler serves one operation; write marks the operations that change
// state, the ones an Idempotency-Key applies to.
type handler struct {
	fn    func(c *call) (result, error)
	write bool
}

var handlers = map[Op]handler{
	ListWorkspaces:  {fn: (*call).listWorkspaces},
	CreateWorkspace: {fn: (*call).createWorkspace, write: true},
	ListAPIKeys:     {fn: (*call).listKeys},
	CreateAPIKey:    {fn: (*call).createKey, write: true},
	RevokeAPIKey:    {fn: (*call).revokeKey, write: true},

	ListAgents:          {fn: (*call).listAgents},
	CreateAgent:         {fn: (*call).createAgent, write: true},
	GetAgent:            {fn: (*call).getAgent},
	RecordSignal:        {fn: (*call).recordSignal, write: true},
	CreateRun:           {fn: (*call).createRun, write: true},
	GetRun:              {fn: (*call).getRun},
	FinishRun:           {fn: (*call).finishRun, write: true},
	ClaimObject:         {fn: (*call).claimObject, write: true},
	RegisterTrace:       {fn: (*call).registerTrace, write: true},
	ListRunSignals:      {fn: (*call).listRunSignals},
	GetReward:           {fn: (*call).getReward},
	GetObjective:        {fn: (*call).getObjective},
	GetObjectiveVersion: {fn: (*call).getObjectiveVersion},
	PutObjective:        {fn: (*call).putObjective, write: true},
	PreviewObjective:    {fn: (*call).previewObjective},
	VersionRewards:      {fn: (*call).versionRewards},
	ListVariations:      {fn: (*call).listVariations},
	CreateVariation:     {fn: (*call).createVariation, write: true},
	GetVariation:        {fn: (*call).getVariation},
	AgentOverview:       {fn: (*call).agentOverview},

	ReportReward: {fn: (*call).reportReward, write: true},
	ListEvidence: {fn: (*call).listEvidence},

	CreateObjective:       {fn: (*call).createObjective, write: true},
	GetObjectiveRun:       {fn: (*call).getObjectiveRun},
	CreateFeedback:        {fn: (*call).createFeedback, write: true},
	ListObjectiveFeedback: {fn: (*call).listObjectiveFeedback},
	ListAgentFeedback:     {fn: (*call).listAgentFeedback},
	GetAgentVariation:     {fn: (*call).getAgentVariation},

	CreateTask:        {fn: (*call).createTask, write: true},
	GetTask:           {fn: (*call).getTask},
	GetTaskVersion:    {fn: (*call).getTaskVersion},
	PutJudgeVersion:   {fn: (*call).putJudgeVersion, write: true},
	ListJudgeVersions: {fn: (*call).listJudgeVersions},

	CreateJudgedReward: {fn: (*call).createJudgedReward, write: true},
	JudgeSignals:       {fn: (*call).judgeSignals, write: true},
	ReviewScores:       {fn: (*call).reviewScores},
	RunDurable:         {fn: (*call).runDurable},
	GetJudgedReward:    {fn: (*call).getJudgedReward},
	TaskCalibration:    {fn: (*call).taskCalibration},
	TaskRewardSummary:  {fn: (*call).taskRewardSummary},

	GetCluster: {fn: (*call).getCluster},
}

// BodyArgs maps a body's top-level string and number members to their text:
// a door without paths and query strings (NATS) takes its targets and
// arguments from the body. Of duplicate keys the first wins, as it does for
// every other reading of a body.
func BodyArgs(raw []byte) (map[string]string, error) {
	args := map[string]string{}
	if len(raw) == 0 {
		return args, nil
	}
	_, err := field.ParseJSON(raw, "", func(v *fastjson.Value) (struct{}, error) {
		o, err := v.Object()
		if err != nil {
			return struct{}{}, field.Errorf("", "body must be a JSON object")
		}
		seen := map[string]bool{}
		o.Visit(func(k []byte, m *fastjson.Value) {
			if seen[string(k)] {
				return
			}
			seen[string(k)] = true
			switch m.Type() {
			case fastjson.TypeString:
				args[string(k)] = string(m.GetStringBytes())
			case fastjson.TypeNumber:
				args[string(k)] = m.String()
			}
		})
		return struct{}{}, nil
	})
	if err != nil {
		return nil, err
	}
	return args, nil
}
